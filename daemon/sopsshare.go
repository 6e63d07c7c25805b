package daemon

import (
	"slices"

	"github.com/flotilla-gitops/flotilla/application"
)

// noProject names, in the start-up warning, the applications outside any
// project.
const noProject = "(no project)"

// sharedSOPSKey lists the projects whose applications would decrypt with
// the controller-wide key: members with no key of their own in a project
// without one, and applications outside any project. When it lists more
// than one, a file encrypted for one team opens in another's repository,
// so the controller says so at start (security.md, rule 5).
func sharedSOPSKey(apps []application.Application) []string {
	var out []string
	for _, a := range apps {
		if !a.DecryptsWithControllerKey() {
			continue
		}
		name := noProject
		if a.Project != nil {
			name = a.Project.Name
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
