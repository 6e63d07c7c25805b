package application

import (
	"strings"
	"testing"
)

func TestAdmitsAnalysisURLMatchesSchemeHostPortAndPathSegments(t *testing.T) {
	al := Allow{AnalysisURLs: []string{
		"http://traefik:8082/metrics",
		"https://prometheus.internal",
		"http://hooks.example:9000/analysis/",
	}}
	for _, c := range []struct {
		url  string
		want bool
	}{
		{"http://traefik:8082/metrics", true},
		{"http://TRAEFIK:8082/metrics", true},
		{"http://traefik:8082/metrics/extra", true},
		{"http://traefik:8082/metricsx", false},           // not at a segment boundary
		{"http://traefik:8082/metrics/../api", false},     // climbs out of the prefix
		{"http://traefik:8082/metrics/%2e%2e/api", false}, // the same, encoded
		{"http://traefik:8083/metrics", false},            // another port
		{"https://traefik:8082/metrics", false},           // another scheme
		{"http://traefik/metrics", false},                 // port 80, not 8082
		{"https://prometheus.internal:443", true},         // the scheme's own port
		{"https://reader:s3cret@prometheus.internal/api/v1", true},
		{"http://prometheus.internal", false},
		{"http://hooks.example:9000/analysis/web?token=x", true},
		{"http://hooks.example:9000/analysis", true},
		{"http://hooks.example:9000/other", false},
		{"http://169.254.169.254/latest/meta-data/", false},
		{"http://traefik:8082@evil:8082/metrics", false}, // userinfo, then another host
		{"::not a url", false},
	} {
		if got := al.AdmitsAnalysisURL(c.url); got != c.want {
			t.Errorf("AdmitsAnalysisURL(%q) = %v, want %v", c.url, got, c.want)
		}
	}
	if (&Allow{}).AdmitsAnalysisURL("http://traefik:8082/metrics") {
		t.Error("the zero Allow admitted an analysis URL: the default must be none")
	}
}

func TestValidateRefusesAnAnalysisURLPrefixThatIsNotOne(t *testing.T) {
	for _, c := range []struct{ entry, want string }{
		{"traefik:8082", "want an http or https URL prefix"},
		{"ftp://traefik/metrics", "want an http or https URL prefix"},
		{"http://u:s3cret@traefik:8082/metrics", "carries no credentials"},
		{"http://traefik:8082/metrics?x=1", "without query or fragment"},
	} {
		input := "apiVersion: flotilla/v1\napplications:\n  - name: shop\n    source: {repoURL: /r}\n    allow:\n      analysisURLs: ['" + c.entry + "']\n"
		_, err := Parse("apps.yaml", []byte(input))
		if err == nil {
			t.Fatalf("accepted analysisURLs %q", c.entry)
		}
		msg := err.Error()
		if !strings.Contains(msg, "apps.yaml") || !strings.Contains(msg, "shop") || !strings.Contains(msg, "allow.analysisURLs[0]") || !strings.Contains(msg, c.want) {
			t.Errorf("analysisURLs %q: error %q, want the file, the application, the field and %q", c.entry, msg, c.want)
		}
		if strings.Contains(msg, "s3cret") {
			t.Errorf("credentials echoed: %v", err)
		}
	}
	input := "apiVersion: flotilla/v1\napplications:\n  - name: shop\n    source: {repoURL: /r}\n    allow:\n      analysisURLs: ['http://traefik:8082/metrics', 'https://prometheus:9090']\n"
	if _, err := Parse("apps.yaml", []byte(input)); err != nil {
		t.Fatalf("refused good prefixes: %v", err)
	}
}
