package application

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/distribution/reference"
)

// MinImageInterval bounds how often an application's registries are asked
// for new tags: registries rate-limit, and a new image is rarely minutes
// old news.
const MinImageInterval = time.Minute

// DefaultImageInterval is ImageUpdates.Interval when none is given.
const DefaultImageInterval = 5 * time.Minute

// ImageUpdates says which images of an application are kept current by
// committing new tags or digests to its repository. Policies live here, in
// the operator's file, and not in the repository: which registries the
// controller queries with the application's credentials, and which fields
// of which files it may rewrite and push, are the operator's decision, not
// a repository author's.
type ImageUpdates struct {
	// Branch is the branch the commits are pushed to. Default: the
	// source's revision, which must then be a branch name.
	Branch string `yaml:"branch,omitempty"`
	// Interval is how often the registries are asked. Default 5m,
	// minimum 1m.
	Interval Duration `yaml:"interval,omitempty"`
	// Author is the commits' author and committer. Required.
	Author CommitAuthor `yaml:"author"`
	// SigningKeyFile is an unencrypted OpenSSH private key (absolute path
	// on the controller's host, typically a swarm secret) the commits are
	// signed with, as git does with gpg.format=ssh. Default: unsigned.
	SigningKeyFile string `yaml:"signingKeyFile,omitempty"`
	// Images are the policies, one per image repository. At least one.
	Images []ImagePolicy `yaml:"images"`
	// PullRequest, when set, proposes the updates instead of committing
	// them to Branch: the commit goes to a branch of the updater's own
	// and a pull request (GitLab: merge request) asks to merge it into
	// Branch. Default: commits straight to Branch.
	PullRequest *ImagePullRequest `yaml:"pullRequest,omitempty"`
}

// DefaultImageBranchPrefix is ImagePullRequest.BranchPrefix when none is
// given.
const DefaultImageBranchPrefix = "flotilla/images"

// ImagePullRequest says where an application's image updates are proposed.
// The head branch (BranchPrefix/<application>) belongs to the updater: it
// holds one commit on the base branch's head, replaced only while it is the
// updater's own. The deploy waits for a human to merge.
type ImagePullRequest struct {
	// Forge is the API the pull request is opened through, declared as
	// for feedback: kind github, gitea (Forgejo too) or gitlab, api, repo
	// (derived from a github.com repoURL when unset) and tokenFile,
	// required here. The token needs to read and write pull requests; the
	// push itself goes over the source's credentials.
	Forge *Forge `yaml:"forge"`
	// BranchPrefix is where the head branch lives. Default
	// "flotilla/images": the branch is flotilla/images/<application>.
	BranchPrefix string `yaml:"branchPrefix,omitempty"`
}

// HeadBranch is the branch the updates of app are pushed to.
func (p *ImagePullRequest) HeadBranch(app string) string {
	prefix := p.BranchPrefix
	if prefix == "" {
		prefix = DefaultImageBranchPrefix
	}
	return strings.TrimSuffix(prefix, "/") + "/" + app
}

// RepoFor returns the forge project of a repository at repoURL: Forge.Repo,
// or the one derived from a github.com URL.
func (p *ImagePullRequest) RepoFor(repoURL string) string {
	if p == nil || p.Forge == nil {
		return ""
	}
	return (&Feedback{Forge: p.Forge}).ForgeRepo(repoURL)
}

// CommitAuthor is the identity image commits carry.
type CommitAuthor struct {
	// Name and Email are required.
	Name  string `yaml:"name"`
	Email string `yaml:"email"`
}

// ImagePolicy is how one image repository is followed and where its
// reference is written. Exactly one of Semver, Pattern and Digest.
type ImagePolicy struct {
	// Image is the repository without tag or digest, as the files spell
	// it (registry.example.com/team/app). Required. A marked field whose
	// image is another repository is refused, not rewritten.
	Image string `yaml:"image"`
	// Semver takes the highest tag that is a semantic version inside this
	// range (Masterminds/semver syntax: ">=1.2 <2", "~1.4", "^2").
	// Pre-releases count only when each bound names one
	// (">=1.0.0-0 <2.0.0-0").
	Semver string `yaml:"semver,omitempty"`
	// Pattern takes, of the tags this regular expression matches in full,
	// the one whose capture sorts highest (see Capture and Order).
	Pattern string `yaml:"pattern,omitempty"`
	// Capture names the pattern's group to sort by. Default: the group
	// named "ts" or the first group, else the whole tag.
	Capture string `yaml:"capture,omitempty"`
	// Order is "numerical" (default) or "alphabetical".
	Order string `yaml:"order,omitempty"`
	// Digest pins this moving tag (e.g. "stable") to the digest it points
	// at now, writing repo:tag@sha256:….
	Digest string `yaml:"digest,omitempty"`
	// TagFilter keeps only tags this regular expression matches, before
	// the policy chooses. Default: every tag.
	TagFilter string `yaml:"tagFilter,omitempty"`
	// Compose marks the compose files and services whose image: value is
	// rewritten.
	Compose []ComposeImageTarget `yaml:"compose,omitempty"`
	// Values marks fields of chart values files.
	Values []ValuesImageTarget `yaml:"values,omitempty"`
}

// ComposeImageTarget marks the image: of named services of one compose
// file. Nothing else in the file is written.
type ComposeImageTarget struct {
	// File is relative to the source's path. Required.
	File string `yaml:"file"`
	// Services are the services whose image: is this policy's. At least
	// one.
	Services []string `yaml:"services"`
}

// ValuesImageTarget marks one scalar of a values file.
type ValuesImageTarget struct {
	// File is relative to the source's path. Required.
	File string `yaml:"file"`
	// Path is the dotted path of the scalar (image.tag). Required.
	Path string `yaml:"path"`
	// Form is what the scalar holds: "reference" (default; repo:tag) or
	// "tag" (the tag only, plus @digest for a digest policy).
	Form string `yaml:"form,omitempty"`
}

// Image policy orders and value forms.
const (
	OrderNumerical    = "numerical"
	OrderAlphabetical = "alphabetical"
	FormReference     = "reference"
	FormTag           = "tag"
)

func (c *checker) imageUpdates(app, p string, a *Application) {
	iu := a.ImageUpdates
	if iu == nil {
		return
	}
	p += ".imageUpdates"
	switch b := iu.Branch; {
	case b == "" || b == "HEAD" || isFullSHAString(b):
		c.report(app, p+".branch", ErrRequired, "required: the source revision %q is not a branch to push to", a.Source.Revision)
	case strings.HasPrefix(b, "-") || strings.IndexFunc(b, badRevisionRune) >= 0:
		c.report(app, p+".branch", ErrInvalid, "%q is not a branch name", b)
	}
	if a.Source.FromRepository() || a.Source.RepoURL == "" {
		c.report(app, p, ErrInvalid, "image updates need a git source to commit to")
	}
	if iu.Interval.Duration < MinImageInterval {
		c.report(app, p+".interval", ErrInvalid, "%s is shorter than the minimum %s", iu.Interval, MinImageInterval)
	}
	if strings.TrimSpace(iu.Author.Name) == "" {
		c.report(app, p+".author.name", ErrRequired, "required: the commits' author name")
	}
	if !strings.Contains(iu.Author.Email, "@") || strings.ContainsAny(iu.Author.Email, "<>\n") {
		c.report(app, p+".author.email", ErrInvalid, "%q is not an e-mail address", iu.Author.Email)
	}
	if iu.SigningKeyFile != "" && !path.IsAbs(iu.SigningKeyFile) {
		c.report(app, p+".signingKeyFile", ErrInvalid, "%q must be an absolute path on the controller's host", iu.SigningKeyFile)
	}
	if len(iu.Images) == 0 {
		c.report(app, p+".images", ErrRequired, "at least one image policy")
	}
	if pr := iu.PullRequest; pr != nil {
		q := p + ".pullRequest"
		if pr.Forge == nil {
			c.report(app, q+".forge", ErrRequired, "required: {kind: github|gitea|gitlab, api: URL, repo: owner/name, tokenFile: /run/secrets/...}")
		} else {
			c.tokenForge(app, q+".forge", pr.Forge, pr.RepoFor(a.Source.RepoURL), "opening a pull request")
		}
		b := pr.BranchPrefix
		if b != "" && (strings.HasPrefix(b, "-") || strings.HasPrefix(b, "/") || strings.Contains(b, "//") || strings.IndexFunc(b, badRevisionRune) >= 0) {
			c.report(app, q+".branchPrefix", ErrInvalid, "%q is not a branch name prefix", b)
		}
		if pr.HeadBranch(app) == iu.Branch {
			c.report(app, q+".branchPrefix", ErrInvalid, "the head branch %s is the base branch", iu.Branch)
		}
	}
	var at *markScope
	if !a.Source.FromRepository() && a.Source.RepoURL != "" {
		at = &markScope{repo: repositoryKey(a.Source.RepoURL), branch: iu.Branch, base: a.Source.Path}
	}
	for i := range iu.Images {
		c.imagePolicy(app, fmt.Sprintf("%s.images[%d]", p, i), &iu.Images[i], a.Source.Path, at)
	}
}

// markScope is where an application's image updates write: the fields its
// policies mark are files of this repository's branch, relative to base.
type markScope struct {
	repo, branch, base string
}

// imageField is one field image updates write, named by what a commit
// touches: the repository, the branch, the file from the repository's
// root, and the field's path in the file.
type imageField struct {
	repo, branch, file string
	// path is the field's keys joined by NUL: a compose service's name
	// may hold a dot, a values path's keys may not.
	path string
}

// markedAt is the first mark of an imageField: its application, the
// field path in the applications file, and the field in words.
type markedAt struct {
	app, at, what string
}

// mark records that the mark at p of app writes the field path (keys)
// of file, and refuses a field marked before, by this application or
// another. Two policies writing one field would each take the other's
// commit for a value to replace (a semver policy and a digest pin cannot
// even compare their values) and commit and redeploy every interval: the
// loop image updates must never make. A nil scope (no git source,
// reported already) marks nothing.
func (c *checker) mark(app, p string, scope *markScope, file string, keys []string, what string) {
	if scope == nil || file == "" || path.IsAbs(file) || escapes(path.Join(scope.base, file)) {
		return
	}
	f := imageField{repo: scope.repo, branch: scope.branch, file: path.Join(scope.base, file), path: strings.Join(keys, "\x00")}
	if c.marks == nil {
		c.marks = map[imageField]markedAt{}
	}
	first, dup := c.marks[f]
	if !dup {
		c.marks[f] = markedAt{app: app, at: p, what: what}
		return
	}
	as := ""
	if first.what != what {
		as = ", as " + first.what
	}
	if first.app == app {
		c.report(app, p, ErrDuplicate, "%s of %s is marked twice (first at %s%s)", what, f.file, first.at, as)
		return
	}
	c.report(app, p, ErrDuplicate, "%s of %s on branch %s is already marked by application %q (at %s%s): two applications writing one field would undo each other's commits every interval", what, f.file, f.branch, first.app, first.at, as)
}

// repositoryKey is where the usual spellings of one repository's URL
// meet: host and path, lowercased, without scheme, user, port, trailing
// slash or ".git" (https://git.example.com/Ops/shop.git and
// git@git.example.com:ops/shop are one repository); a local repository is
// its cleaned path. Forges treat paths case-insensitively, so ignoring case
// can only join two spellings of one repository.
func repositoryKey(repoURL string) string {
	var host, p string
	switch {
	case strings.Contains(repoURL, "://"):
		u, err := url.Parse(repoURL)
		if err != nil {
			return repoURL
		}
		if u.Scheme == "file" {
			return path.Clean(u.Path)
		}
		host, p = u.Hostname(), u.Path
	case path.IsAbs(repoURL):
		return path.Clean(repoURL)
	default:
		rest := repoURL
		if _, after, ok := strings.Cut(repoURL, "@"); ok {
			rest = after
		}
		host, p, _ = strings.Cut(rest, ":")
	}
	p = strings.TrimSuffix(strings.Trim(p, "/"), ".git")
	return strings.ToLower(host + "/" + strings.Trim(p, "/"))
}

func (c *checker) imagePolicy(app, p string, ip *ImagePolicy, base string, scope *markScope) {
	named, err := reference.ParseNormalizedNamed(ip.Image)
	switch {
	case ip.Image == "":
		c.report(app, p+".image", ErrRequired, "required: the image repository, such as registry.example.com/app")
	case err != nil:
		c.report(app, p+".image", ErrInvalid, "%q is not an image repository: %v", ip.Image, err)
	case !reference.IsNameOnly(named):
		c.report(app, p+".image", ErrInvalid, "%q names a tag or digest; give the repository only", ip.Image)
	}
	n := 0
	for _, set := range []bool{ip.Semver != "", ip.Pattern != "", ip.Digest != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		c.report(app, p, ErrInvalid, "set exactly one of semver, pattern and digest")
	}
	if ip.Semver != "" {
		if _, err := semver.NewConstraint(ip.Semver); err != nil {
			c.report(app, p+".semver", ErrInvalid, "%q is not a semver range: %v", ip.Semver, err)
		}
	}
	if ip.Pattern != "" {
		re, err := regexp.Compile(ip.Pattern)
		switch {
		case err != nil:
			c.report(app, p+".pattern", ErrInvalid, "%v", err)
		case ip.Capture != "" && re.SubexpIndex(ip.Capture) < 0:
			c.report(app, p+".capture", ErrInvalid, "the pattern has no group named %q", ip.Capture)
		}
	} else if ip.Capture != "" || ip.Order != "" {
		c.report(app, p+".capture", ErrInvalid, "capture and order apply to a pattern policy only")
	}
	switch ip.Order {
	case "", OrderNumerical, OrderAlphabetical:
	default:
		c.report(app, p+".order", ErrInvalid, "must be %s or %s, not %q", OrderNumerical, OrderAlphabetical, ip.Order)
	}
	if ip.Digest != "" && !tagRE.MatchString(ip.Digest) {
		c.report(app, p+".digest", ErrInvalid, "%q is not a tag", ip.Digest)
	}
	if ip.TagFilter != "" {
		if _, err := regexp.Compile(ip.TagFilter); err != nil {
			c.report(app, p+".tagFilter", ErrInvalid, "%v", err)
		}
	}
	if len(ip.Compose) == 0 && len(ip.Values) == 0 {
		c.report(app, p, ErrRequired, "mark at least one field to write: compose (file and services) or values (file and path)")
	}
	for j, t := range ip.Compose {
		q := fmt.Sprintf("%s.compose[%d]", p, j)
		c.relPath(app, q+".file", t.File, base)
		if len(t.Services) == 0 {
			c.report(app, q+".services", ErrRequired, "at least one service whose image: is written")
		}
		for _, s := range t.Services {
			c.mark(app, q+".services", scope, t.File, []string{"services", s, "image"}, fmt.Sprintf("the image of service %q", s))
		}
	}
	for j, t := range ip.Values {
		q := fmt.Sprintf("%s.values[%d]", p, j)
		c.relPath(app, q+".file", t.File, base)
		if t.Path == "" || strings.HasPrefix(t.Path, ".") || strings.HasSuffix(t.Path, ".") || strings.Contains(t.Path, "..") {
			c.report(app, q+".path", ErrInvalid, "%q is not a dotted path such as image.tag", t.Path)
		} else {
			// services.web.image in a compose file is the field a
			// compose mark of service web writes.
			c.mark(app, q+".path", scope, t.File, strings.Split(t.Path, "."), "path "+t.Path)
		}
		switch t.Form {
		case "", FormReference, FormTag:
		default:
			c.report(app, q+".form", ErrInvalid, "must be %s or %s, not %q", FormReference, FormTag, t.Form)
		}
	}
}

// tagRE is the grammar of an image tag.
var tagRE = regexp.MustCompile(`^[\w][\w.-]{0,127}$`)

func isFullSHAString(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}
