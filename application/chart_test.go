package application

import (
	"reflect"
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
