// Package chartengine renders a chart — a directory of Go templates and
// values, laid out the way Helm charts are — into the same compose.Rendered
// the compose renderer makes from a plain compose project. The reconciler
// cannot tell the two apart: a chart's output goes through the compose
// loader, conversion, planning and guards exactly as a compose file does.
//
// A chart directory holds:
//
//	Chart.yaml          apiVersion (v2), name, version (SemVer), appVersion, description, dependencies
//	values.yaml         the defaults, optional
//	values.schema.json  a JSON Schema the merged values must satisfy, optional
//	templates/          Go text/templates; each output is a compose fragment,
//	                    files whose name starts with "_" only define helpers
//	files/              content configs, secrets and env files may reference, optional
//
// Rendering is a pure function of the chart, the values and the release
// (stack name and revision): no clock, randomness, environment or network
// reaches a template, so the same inputs give the same bytes.
//
// The package reads only inside the chart directory and the repository it
// sits in (value files may live elsewhere in the repository); symlinks in a
// chart are refused outright, so nothing a chart names can point out of it.
package chartengine
