package imagepolicy

import (
	"slices"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/application"
)

func compile(t *testing.T, p application.ImagePolicy) *Policy {
	t.Helper()
	p.Image = "registry.test/app"
	c, err := Compile(p)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return c
}

func TestPolicy_ChooseTag(t *testing.T) {
	semver := application.ImagePolicy{Semver: ">=1.0.0 <2"}
	pre := application.ImagePolicy{Semver: ">=1.0.0-0 <2.0.0-0"}
	build := application.ImagePolicy{Pattern: `build-(?P<n>\d+)`, Capture: "n"}
	dated := application.ImagePolicy{Pattern: `main-[0-9a-f]+-(?P<ts>\d{8})`, Order: application.OrderAlphabetical}
	filtered := application.ImagePolicy{Semver: ">=1", TagFilter: `^1\.4\.`}
	tests := []struct {
		name    string
		policy  application.ImagePolicy
		current string
		tags    []string
		want    Outcome
		wantTag string
	}{
		{"newer patch in range", semver, "1.2.0", []string{"1.2.0", "1.2.1", "1.10.0", "2.0.0"}, Update, "1.10.0"},
		{"numeric, not lexical, order", semver, "1.2.0", []string{"1.9.0", "1.10.0", "1.2.0"}, Update, "1.10.0"},
		{"already newest", semver, "1.10.0", []string{"1.2.0", "1.10.0"}, Current, "1.10.0"},
		{"v prefix accepted and kept", semver, "v1.0.0", []string{"v1.0.0", "v1.1.0"}, Update, "v1.1.0"},
		{"pre-release ignored by a plain range", semver, "1.2.0", []string{"1.2.0", "1.3.0-rc.1"}, Current, "1.2.0"},
		{"pre-release taken when the range names one", pre, "1.2.0", []string{"1.2.0", "1.3.0-rc.1"}, Update, "1.3.0-rc.1"},
		{"release beats its pre-release", pre, "1.3.0-rc.1", []string{"1.3.0-rc.1", "1.3.0"}, Update, "1.3.0"},
		{"invalid tags skipped", semver, "1.0.0", []string{"latest", "1.0.0", "1.x", "", "1.0.1;rm", "1.0.2"}, Update, "1.0.2"},
		{"backwards: current newer than the registry's newest", semver, "1.5.0", []string{"1.4.0", "1.5.0-rc.1"}, Vanished, "1.5.0"},
		{"backwards while current still listed", semver, "2.1.0", []string{"1.4.0", "2.1.0"}, Backwards, "2.1.0"},
		{"current vanished but a newer tag exists", semver, "1.1.0", []string{"1.2.0"}, Update, "1.2.0"},
		{"current vanished, nothing fits", semver, "1.1.0", []string{"latest", "3.0.0"}, Vanished, "1.1.0"},
		{"nothing fits at all", semver, "1.1.0", []string{"1.1.0", "3.0.0"}, Current, "1.1.0"},
		{"no candidate, current is not a version", semver, "latest", []string{"latest", "3.0.0"}, NoCandidate, "latest"},
		{"adopt from latest", semver, "latest", []string{"latest", "1.3.0"}, Update, "1.3.0"},
		{"same version spelled twice keeps git's", semver, "1.2.0", []string{"1.2.0", "v1.2.0"}, Current, "1.2.0"},
		{"pattern numeric capture", build, "build-9", []string{"build-9", "build-10", "build-x", "release-99"}, Update, "build-10"},
		{"pattern must match the whole tag", build, "build-9", []string{"build-9", "build-99-debug"}, Current, "build-9"},
		{"pattern backwards", build, "build-12", []string{"build-10", "build-12", "build-11"}, Current, "build-12"},
		{"pattern current gone, older remains", build, "build-12", []string{"build-10", "build-11"}, Vanished, "build-12"},
		{"pattern huge numbers", build, "build-18446744073709551616", []string{"build-18446744073709551617"}, Update, "build-18446744073709551617"},
		{"dated ts capture alphabetical", dated, "main-abc-20260101", []string{"main-abc-20260101", "main-fff-20251231", "main-012-20260102"}, Update, "main-012-20260102"},
		{"tag filter", filtered, "1.4.0", []string{"1.4.0", "1.4.2", "1.5.0", "2.0.0"}, Update, "1.4.2"},
		{"empty registry", semver, "1.0.0", nil, Vanished, "1.0.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := compile(t, tt.policy)
			d := p.ChooseTag(tt.current, tt.tags)
			if d.Outcome != tt.want || d.Tag != tt.wantTag {
				t.Fatalf("ChooseTag(%q, %q) = %s %q (%s), want %s %q", tt.current, tt.tags, d.Outcome, d.Tag, d.Reason, tt.want, tt.wantTag)
			}
			if d.Outcome != Update && d.Outcome != Current && d.Reason == "" {
				t.Errorf("outcome %s has no reason for the report", d.Outcome)
			}
		})
	}
}

func TestPolicy_ChooseDigest(t *testing.T) {
	p := compile(t, application.ImagePolicy{Digest: "stable"})
	const a, b = "sha256:aaaa", "sha256:bbbb"
	tests := []struct {
		name              string
		current, resolved string
		want              Outcome
		wantDigest        string
	}{
		{"first pin", "", a, Update, a},
		{"moved", a, b, Update, b},
		{"unchanged writes nothing", a, a, Current, a},
		{"tag gone keeps the pin", a, "", Vanished, a},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := p.ChooseDigest(tt.current, tt.resolved)
			if d.Outcome != tt.want || d.Digest != tt.wantDigest || d.Tag != "stable" {
				t.Fatalf("ChooseDigest(%q, %q) = %+v, want %s %s", tt.current, tt.resolved, d, tt.want, tt.wantDigest)
			}
		})
	}
}

func TestCompile_rejects(t *testing.T) {
	for _, p := range []application.ImagePolicy{
		{Semver: "not a range"},
		{Pattern: "("},
		{Pattern: `(\d+)`, Capture: "missing"},
		{Semver: "1", TagFilter: "["},
		{},
	} {
		p.Image = "app"
		if _, err := Compile(p); err == nil {
			t.Errorf("Compile(%+v) = nil error", p)
		}
	}
}

func TestParseRef(t *testing.T) {
	tests := []struct {
		value, image string
		want         Ref
		wantErr      bool
	}{
		{"127.0.0.1:5000/app:1.2", "127.0.0.1:5000/app", Ref{"127.0.0.1:5000/app", "1.2", ""}, false},
		{"127.0.0.1:5000/app", "127.0.0.1:5000/app", Ref{"127.0.0.1:5000/app", "", ""}, false},
		{"nginx:1.25", "docker.io/library/nginx", Ref{"nginx", "1.25", ""}, false},
		{"reg.test/app:stable@sha256:" + hex64, "reg.test/app", Ref{"reg.test/app", "stable", "sha256:" + hex64}, false},
		{"reg.test/app@sha256:" + hex64, "reg.test/app", Ref{"reg.test/app", "", "sha256:" + hex64}, false},
		{"reg.test/other:1", "reg.test/app", Ref{}, true},
		{"Not A Ref", "reg.test/app", Ref{}, true},
	}
	for _, tt := range tests {
		got, err := ParseRef(tt.value, tt.image)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseRef(%q, %q) = %+v, %v; want %+v, err %v", tt.value, tt.image, got, err, tt.want, tt.wantErr)
		}
		if err == nil && got.String() != tt.value {
			t.Errorf("ParseRef(%q).String() = %q", tt.value, got.String())
		}
	}
}

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// Tags come from a registry, which the controller does not trust: no tag
// list makes a decision panic or choose a tag the registry did not list,
// and an update never moves a comparable current tag backwards.
func FuzzPolicy_ChooseTag(f *testing.F) {
	f.Add("1.0.0", "1.0.1\x001.0.0\x00v2.0.0-rc.1\x00latest", ">=1.0.0-0 <3")
	f.Add("build-7", "build-10\x00build-x\x00build-99999999999999999999999", "")
	f.Fuzz(func(t *testing.T, current, joined, rng string) {
		tags := strings.Split(joined, "\x00")
		for _, ip := range []application.ImagePolicy{{Semver: rng}, {Pattern: `build-(\d+)`}} {
			ip.Image = "r/app"
			p, err := Compile(ip)
			if err != nil {
				continue
			}
			d := p.ChooseTag(current, tags)
			if d.Outcome == Update {
				if !slices.Contains(tags, d.Tag) {
					t.Fatalf("chose %q, not listed", d.Tag)
				}
				if r, ok := p.Compare(d.Tag, current); ok && r < 0 {
					t.Fatalf("moved backwards from %q to %q", current, d.Tag)
				}
			}
		}
	})
}
