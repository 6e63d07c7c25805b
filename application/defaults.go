package application

import (
	"path"
	"strings"
)

// Defaults fills every field left empty with its documented default, in
// place, and cleans Source.Path. It is the only place defaults live, so the
// doc comments in types.go and this function are the whole story. Running
// it twice changes nothing.
//
// Credentials are left alone: they hold file names only, and the default
// username (DefaultUsername) is applied by whoever reads them. Wait has no
// default timeout; Validate requires one when Wait is present.
//
// A notification of unknown type keeps an empty template; Validate reports
// the type.
func Defaults(f *File) {
	for i := range f.SecretStores {
		s := &f.SecretStores[i]
		if s.PollInterval.Duration == 0 {
			s.PollInterval.Duration = DefaultPollInterval
		}
		if v := s.Vault; v != nil {
			if v.KVVersion == 0 {
				v.KVVersion = 2
			}
			v.Mount = strings.Trim(v.Mount, "/")
			if v.Auth.AppRole != nil && v.Auth.AppRole.Mount == "" {
				v.Auth.AppRole.Mount = "approle"
			}
			if v.Auth.JWT != nil && v.Auth.JWT.Mount == "" {
				v.Auth.JWT.Mount = "jwt"
			}
			if v.Auth.AWS != nil && v.Auth.AWS.Mount == "" {
				v.Auth.AWS.Mount = "aws"
			}
		}
	}
	for i := range f.Notifications {
		n := &f.Notifications[i]
		if len(n.Events) == 0 {
			n.Events = NotificationEvents()
		}
		if n.Template == "" {
			n.Template = n.Type.DefaultTemplate()
		}
	}
	for i := range f.Applications {
		a := &f.Applications[i]
		if a.Stack == "" {
			a.Stack = a.Name
		}
		if a.Destination == "" {
			a.Destination = LocalDestination
		}
		if a.Source.Revision == "" {
			a.Source.Revision = DefaultRevision
		}
		if v := a.Source.Values; v != nil && v.Revision == "" {
			v.Revision = DefaultRevision
		}
		if a.Source.Path == "" {
			a.Source.Path = DefaultPath
		} else {
			a.Source.Path = path.Clean(a.Source.Path)
		}
		if a.SyncPolicy.Interval.Duration == 0 {
			a.SyncPolicy.Interval.Duration = DefaultInterval
		}
		if iu := a.ImageUpdates; iu != nil {
			if iu.Interval.Duration == 0 {
				iu.Interval.Duration = DefaultImageInterval
			}
			if iu.Branch == "" {
				iu.Branch = strings.TrimPrefix(a.Source.Revision, "refs/heads/")
			}
			for i := range iu.Images {
				ip := &iu.Images[i]
				if ip.Pattern != "" && ip.Order == "" {
					ip.Order = OrderNumerical
				}
				for j := range ip.Values {
					if ip.Values[j].Form == "" {
						ip.Values[j].Form = FormReference
					}
				}
			}
		}
		if a.SyncPolicy.RetainRotated == nil {
			n := DefaultRetainRotated
			a.SyncPolicy.RetainRotated = &n
		}
		if a.History == 0 {
			a.History = DefaultHistory
		}
		// Set again on every run: membership follows the name.
		a.Project = nil
		project := ""
		if pr := ProjectOf(f.Projects, a.Name); pr != nil {
			a.Project = &ProjectTerms{Name: pr.Name, SourceRepos: pr.SourceRepos, SOPS: pr.SOPS}
			project = pr.Name
		}
		if a.IsPreview() {
			// A pull request chose the preview's name and code: the
			// grants by name or project are not for it.
			a.SecretStores = previewGrants(f, a.Generated)
		} else {
			a.SecretStores = grantedStores(f.SecretStores, a.Name, project)
		}
	}
}
