package application

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/flotilla-gitops/flotilla/window"
)

// SyncWindow is a recurring period in which automated syncs (and
// self-heal) of the applications it names are allowed or denied. The
// window package says how several windows combine.
type SyncWindow struct {
	// Kind is allow or deny. Required.
	Kind string `yaml:"kind"`
	// Schedule is a five-field cron expression or a descriptor ("@daily"),
	// read in UTC unless prefixed with "CRON_TZ=Zone ". Required.
	Schedule string `yaml:"schedule"`
	// Duration is how long each activation lasts, such as "1h". Required,
	// positive.
	Duration Duration `yaml:"duration"`
	// Applications are names or path.Match globs ("shop-*") of the
	// applications the window applies to. Required, at least one.
	Applications []string `yaml:"applications"`
	// ManualSync lets an explicit sync run while this window blocks.
	// Default false.
	ManualSync bool `yaml:"manualSync,omitempty"`
}

// Window converts w for package window.
func (w SyncWindow) Window() window.Window {
	return window.Window{
		Kind: window.Kind(w.Kind), Schedule: w.Schedule, Duration: w.Duration.Duration,
		Applications: slices.Clone(w.Applications), ManualSync: w.ManualSync,
	}
}

// Windows compiles the file's sync windows. Validate has already checked
// them, so an error here means the File was built in code unvalidated.
func (f *File) Windows() (*window.Set, error) {
	ws := make([]window.Window, len(f.SyncWindows))
	for i, w := range f.SyncWindows {
		ws[i] = w.Window()
	}
	return window.Compile(ws)
}

// Generated records which set made an application and what happens to its
// stack when the set stops generating it.
type Generated struct {
	// Set is the ApplicationSet's name.
	Set string
	// Prune removes the stack when the application leaves the set.
	Prune bool
	// Preview is true when a pull-request generator made the application.
	Preview bool
	// Index is the set's position in applicationSets, for messages.
	Index int
	// Element names the generator element the application came from by
	// its parameters ("basename=a path=apps/a"), for messages. Not its
	// position: a directory added in front must not change the others.
	Element string
}

// ordering checks what orders applications: sync windows, dependencies
// and application sets. Dependencies on names only a set can produce are
// checked once the sets are expanded (File.Expanded).
func (c *checker) ordering(f *File) {
	c.syncWindows(f.SyncWindows)
	c.dependsOn(f.Applications, len(f.ApplicationSets) > 0, func(i int) string { return "applications[" + strconv.Itoa(i) + "]" })
	c.applicationSets(f)
}

func (c *checker) syncWindows(ws []SyncWindow) {
	for i, w := range ws {
		p := "syncWindows[" + strconv.Itoa(i) + "]"
		switch w.Kind {
		case string(window.Allow), string(window.Deny):
		case "":
			c.report("", p+".kind", ErrRequired, "required: allow or deny")
		default:
			c.report("", p+".kind", ErrInvalid, "%q is not allow or deny", w.Kind)
		}
		if _, err := window.ParseSchedule(w.Schedule); err != nil {
			if strings.TrimSpace(w.Schedule) == "" {
				c.report("", p+".schedule", ErrRequired, "required: a cron expression such as \"0 18 * * 5\" (UTC) or \"@daily\"")
			} else {
				c.report("", p+".schedule", ErrInvalid, "%v", err)
			}
		}
		switch d := w.Duration.Duration; {
		case d == 0:
			c.report("", p+".duration", ErrRequired, "required: how long each activation lasts, such as \"1h\"")
		case d < 0:
			c.report("", p+".duration", ErrInvalid, "must be positive, not %s", w.Duration)
		}
		if len(w.Applications) == 0 {
			c.report("", p+".applications", ErrRequired, "required: names or globs of the applications the window applies to")
		}
		for j, pat := range w.Applications {
			if _, err := path.Match(pat, ""); err != nil || strings.TrimSpace(pat) == "" {
				c.report("", fmt.Sprintf("%s.applications[%d]", p, j), ErrInvalid, "%q is not a name or glob", pat)
			}
		}
	}
}

// dependsOn checks every application's dependencies: known names (unless
// sets may still generate them: deferred says so), no self-reference, no
// repeats, and no cycle. A cycle is reported once, naming every member.
func (c *checker) dependsOn(apps []Application, deferred bool, prefix func(i int) string) {
	index := make(map[string]int, len(apps))
	for i, a := range apps {
		if _, dup := index[a.Name]; !dup && a.Name != "" {
			index[a.Name] = i
		}
	}
	for i, a := range apps {
		seen := map[string]bool{}
		for j, d := range a.DependsOn {
			fp := fmt.Sprintf("%s.dependsOn[%d]", prefix(i), j)
			_, known := index[d]
			switch {
			case d == "":
				c.report(a.Name, fp, ErrRequired, "empty name")
			case d == a.Name:
				c.report(a.Name, fp, ErrInvalid, "an application cannot depend on itself")
			case seen[d]:
				c.report(a.Name, fp, ErrDuplicate, "%q is listed twice", d)
			case !known && !deferred:
				c.report(a.Name, fp, ErrInvalid, "%q is not an application of this file", d)
			}
			seen[d] = true
		}
	}
	// Depth-first search with three colours; a grey node reached again
	// closes a cycle, which the stack spells out.
	const (
		white = iota
		grey
		black
	)
	colour := make([]int, len(apps))
	var stack []int
	reported := map[string]bool{}
	var visit func(i int)
	visit = func(i int) {
		colour[i] = grey
		stack = append(stack, i)
		for _, d := range apps[i].DependsOn {
			j, ok := index[d]
			if !ok || j == i {
				continue
			}
			switch colour[j] {
			case white:
				visit(j)
			case grey:
				k := slices.Index(stack, j)
				names := make([]string, 0, len(stack)-k+1)
				for _, n := range stack[k:] {
					names = append(names, apps[n].Name)
				}
				key := cycleKey(names)
				if !reported[key] {
					reported[key] = true
					names = append(names, apps[j].Name)
					c.report(apps[j].Name, prefix(j)+".dependsOn", ErrInvalid,
						"dependsOn forms a cycle: %s", strings.Join(names, " → "))
				}
			}
		}
		stack = stack[:len(stack)-1]
		colour[i] = black
	}
	for i := range apps {
		if colour[i] == white {
			visit(i)
		}
	}
}

// cycleKey names a cycle independently of where it was entered.
func cycleKey(names []string) string {
	s := slices.Clone(names)
	slices.Sort(s)
	return strings.Join(s, "\x00")
}
