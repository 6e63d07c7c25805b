package application

import (
	"reflect"
	"strings"
	"testing"
)

const chartApp = `apiVersion: flotilla/v1
applications:
  - name: shop-eu
    source:
      repoURL: https://git.example.com/ops/deploy.git
      path: charts/shop
      chart:
`

func TestParse_chartSource(t *testing.T) {
	f, err := Parse("apps.yaml", []byte(chartApp+`        valueFiles: [values-eu.yaml, ../common/values.yaml]
        values:
          replicas: 3
          web: {message: hallo, ports: [80, 443]}
        set:
          image.tag: "1.4.2"
          worker.replicas: 2
`))
	if err != nil {
		t.Fatal(err)
	}
	want := &Chart{
		ValueFiles: []string{"values-eu.yaml", "../common/values.yaml"},
		Values:     Values{"replicas": 3, "web": map[string]any{"message": "hallo", "ports": []any{80, 443}}},
		Set:        Values{"image.tag": "1.4.2", "worker.replicas": 2},
	}
	if got := f.Applications[0].Source.Chart; !reflect.DeepEqual(got, want) {
		t.Fatalf("chart:\n got %#v\nwant %#v", got, want)
	}
}

func TestParse_chartWithNoOptionsIsPresent(t *testing.T) {
	f, err := Parse("apps.yaml", []byte(chartApp))
	if err != nil {
		t.Fatal(err)
	}
	if f.Applications[0].Source.Chart == nil {
		t.Fatal("chart: with no options read as absent")
	}
}

func TestParse_chartProblems(t *testing.T) {
	for name, c := range map[string]struct {
		text  string
		wants []want
	}{
		"unknown key":                      {chartApp + "        valuefile: [a.yaml]\n", []want{{line: 8, field: "applications[0].source.chart.valuefile", kind: ErrUnknownField, msg: "valueFiles"}}},
		"values not a mapping":             {chartApp + "        values: [1, 2]\n", []want{{line: 8, field: "applications[0].source.chart.values", kind: ErrType, msg: "a mapping"}}},
		"value file leaves the repository": {chartApp + "        valueFiles: [../../../x.yaml]\n", []want{{line: 8, field: "applications[0].source.chart.valueFiles[0]", kind: ErrInvalid, msg: "leaves the repository"}}},
		"set value is a mapping":           {chartApp + "        set: {image: {tag: x}}\n", []want{{line: 8, field: "applications[0].source.chart.set.image", kind: ErrType, msg: "single value"}}},
		"set key with an empty part":       {chartApp + "        set: {image..tag: x}\n", []want{{line: 8, field: "applications[0].source.chart.set.image..tag", kind: ErrInvalid, msg: "dotted key"}}},
		"set key with an index":            {chartApp + "        set: {\"ports[0]\": 80}\n", []want{{line: 8, field: "applications[0].source.chart.set.ports[0]", kind: ErrInvalid, msg: "list indices"}}},
		"compose too":                      {chartApp + "      compose: {files: [docker-compose.yml]}\n", []want{{line: 7, app: "shop-eu", field: "applications[0].source.chart", kind: ErrInvalid, msg: "exclude each other"}}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("apps.yaml", []byte(c.text))
			checkProblems(t, err, c.wants)
		})
	}
}

const repoChartApp = `apiVersion: flotilla/v1
applications:
  - name: redis
    source:
      chart:
        repoURL: https://charts.example.com/stable
        name: redis
        version: "~7.2"
`

func TestParse_chartFromARepository(t *testing.T) {
	f, err := Parse("apps.yaml", []byte(repoChartApp+"        credentials: {tokenFile: /run/secrets/charts-token}\n        set: {replicas: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := f.Applications[0].Source
	want := &Chart{RepoURL: "https://charts.example.com/stable", Name: "redis", Version: "~7.2",
		Credentials: &ChartCredentials{TokenFile: "/run/secrets/charts-token"}, Set: Values{"replicas": 2}}
	if !reflect.DeepEqual(s.Chart, want) || !s.FromRepository() || s.RepoURL != "" {
		t.Fatalf("chart:\n got %#v\nwant %#v", s.Chart, want)
	}
}

func TestParse_chartRepositoryProblems(t *testing.T) {
	const f = "applications[0].source"
	for name, c := range map[string]struct {
		text  string
		wants []want
	}{
		"unknown key":         {repoChartApp + "        tokenFile: /x\n", []want{{line: 9, field: f + ".chart.tokenFile", kind: ErrUnknownField}}},
		"git repoURL too":     {repoChartApp + "      repoURL: https://git.example.com/x.git\n", []want{{line: 9, field: f + ".repoURL", kind: ErrInvalid, msg: "takes no git repoURL"}}},
		"git path too":        {repoChartApp + "      path: charts/redis\n", []want{{line: 9, field: f + ".path", kind: ErrInvalid, msg: "takes no git path"}}},
		"compose too":         {repoChartApp + "      compose: {files: [a.yml]}\n", []want{{line: 5, field: f + ".chart", kind: ErrInvalid, msg: "exclude each other"}}},
		"plain http":          {strings.Replace(repoChartApp, "https://", "http://", 1), []want{{line: 6, field: f + ".chart.repoURL", kind: ErrInvalid, msg: "insecure: true"}}},
		"credentials in URL":  {strings.Replace(repoChartApp, "https://", "https://u:p@", 1), []want{{line: 6, field: f + ".chart.repoURL", kind: ErrInvalid, msg: "credentials"}}},
		"bad constraint":      {strings.Replace(repoChartApp, `"~7.2"`, `"~x.y"`, 1), []want{{line: 8, field: f + ".chart.version", kind: ErrInvalid, msg: "SemVer constraint"}}},
		"no name":             {strings.Replace(repoChartApp, "        name: redis\n", "", 1), []want{{line: 5, field: f + ".chart.name", kind: ErrRequired}}},
		"token and password":  {repoChartApp + "        credentials: {tokenFile: /t, usernameFile: /u, passwordFile: /p}\n", []want{{line: 9, field: f + ".chart.credentials", kind: ErrInvalid, msg: "not both"}}},
		"relative token file": {repoChartApp + "        credentials: {tokenFile: t}\n", []want{{line: 9, field: f + ".chart.credentials.tokenFile", kind: ErrInvalid, msg: "absolute"}}},
		"password over http":  {strings.Replace(repoChartApp, "https://", "http://", 1) + "        insecure: true\n        credentials: {tokenFile: /t}\n", []want{{line: 10, field: f + ".chart.credentials", kind: ErrInvalid, msg: "plain http"}}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("apps.yaml", []byte(c.text))
			checkProblems(t, err, c.wants)
		})
	}
}

func TestParse_chartValuesFromASecondGitRepository(t *testing.T) {
	f, err := Parse("apps.yaml", []byte(repoChartApp+`      values:
        repoURL: https://git.example.com/ops/values.git
        files: [redis/prod.yaml, common.yaml]
        credentials: {passwordFile: /run/secrets/values-token}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := &ValuesSource{RepoURL: "https://git.example.com/ops/values.git", Revision: DefaultRevision,
		Files: []string{"redis/prod.yaml", "common.yaml"}, Credentials: &Credentials{PasswordFile: "/run/secrets/values-token"}}
	if got := f.Applications[0].Source.Values; !reflect.DeepEqual(got, want) {
		t.Fatalf("values:\n got %#v\nwant %#v", got, want)
	}
}

func TestParse_chartValuesRepositoryProblems(t *testing.T) {
	const f = "applications[0].source.values"
	vals := func(body string) string {
		return chartApp + "      values:\n        repoURL: https://git.example.com/ops/values.git\n" + body
	}
	const compose = `apiVersion: flotilla/v1
applications:
  - name: shop-eu
    source:
      repoURL: https://git.example.com/ops/deploy.git
      values: {repoURL: https://git.example.com/ops/values.git, files: [a.yaml]}
`
	for name, c := range map[string]struct {
		text  string
		wants []want
	}{
		"no chart":               {compose, []want{{line: 6, field: f, kind: ErrInvalid, msg: "need a chart"}}},
		"no files":               {vals(""), []want{{line: 8, field: f + ".files", kind: ErrRequired, msg: "at least one"}}},
		"unknown key":            {vals("        files: [a.yaml]\n        valueFiles: [b.yaml]\n"), []want{{line: 11, field: f + ".valueFiles", kind: ErrUnknownField}}},
		"file leaves the repo":   {vals("        files: [../a.yaml]\n"), []want{{line: 10, field: f + ".files[0]", kind: ErrInvalid, msg: "leaves the repository"}}},
		"absolute file":          {vals("        files: [/etc/a.yaml]\n"), []want{{line: 10, field: f + ".files[0]", kind: ErrInvalid, msg: "relative"}}},
		"credentials in the URL": {strings.Replace(vals("        files: [a.yaml]\n"), "https://git.example.com/ops/values", "https://u:pw@git.example.com/ops/values", 1), []want{{line: 9, field: f + ".repoURL", kind: ErrInvalid, msg: "password"}}},
		"ssh key over https":     {vals("        files: [a.yaml]\n        credentials: {sshKeyFile: /k, knownHostsFile: /h}\n"), []want{{line: 11, field: f + ".credentials.sshKeyFile", kind: ErrInvalid, msg: "https"}}},
		"bad revision":           {vals("        files: [a.yaml]\n        revision: -x\n"), []want{{line: 11, field: f + ".revision", kind: ErrInvalid}}},
		"relative credentials":   {vals("        files: [a.yaml]\n        credentials: {passwordFile: token}\n"), []want{{line: 11, field: f + ".credentials.passwordFile", kind: ErrInvalid, msg: "absolute"}}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("apps.yaml", []byte(c.text))
			checkProblems(t, err, c.wants)
		})
	}
}
