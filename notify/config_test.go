package notify

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/events"
	"github.com/flotilla-gitops/flotilla/fault"
)

const appsYAML = `apiVersion: flotilla/v1
applications:
  - name: shop
    source: {repoURL: https://git.example.com/shop.git}
`

func TestNotificationsAreReadFromTheApplicationsFile(t *testing.T) {
	f, err := application.Parse("apps.yaml", []byte(appsYAML+`notifications:
  - name: ops-slack
    type: slack
    urlFile: /run/secrets/slack-url
    events: [sync.failed, health.changed]
    services: true
    applications: [shop]
  - name: alerts
    type: webhook
    urlEnv: ALERT_URL
    template: '{{.App}}: {{.Type}} {{.Message}}'
    headers:
      - {name: X-Team, value: ops}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []application.Notification{
		{Name: "ops-slack", Type: application.NotifySlack, URLFile: "/run/secrets/slack-url",
			Events: []events.Type{events.SyncFailed, events.HealthChanged}, Services: true,
			Applications: []string{"shop"}, Template: application.DefaultSlackTemplate},
		{Name: "alerts", Type: application.NotifyWebhook, URLEnv: "ALERT_URL",
			Events:   application.NotificationEvents(),
			Template: "{{.App}}: {{.Type}} {{.Message}}",
			Headers:  []application.Header{{Name: "X-Team", Value: "ops"}}},
	}
	if !reflect.DeepEqual(f.Notifications, want) {
		t.Errorf("notifications:\n got %+v\nwant %+v", f.Notifications, want)
	}
	if _, err := New(f.Notifications, Options{}); err != nil {
		t.Errorf("New refuses a validated file: %v", err)
	}
}

func TestNotificationMistakesAreReportedWithFieldAndLine(t *testing.T) {
	const secret = "https://hooks.slack.com/services/T0/B0/SECRET"
	_, err := application.Parse("apps.yaml", []byte(appsYAML+`notifications:
  - name: ops
    type: email
    urlFile: `+secret+`
    events: [sync.failed, sync.exploded, sync.failed]
    services: true
    applications: [billing]
    template: '{{.Nope}}'
  - name: ops
    type: slack
    headers: [{name: X-Team, value: ops}]
  - name: hook
    type: webhook
    urlEnv: URL
    urlFile: /run/secrets/url
    template: '{{.App'
    headers:
      - {name: Authorization, value: Bearer x}
      - {name: x-a, value: "1"}
      - {name: X-A, value: "2"}
      - {name: "bad name", value: "3"}
  - name: env
    type: webhook
    urlEnv: `+secret+`
    url: `+secret+`
`))
	if err == nil {
		t.Fatal("no error")
	}
	if strings.Contains(err.Error(), "SECRET") {
		t.Errorf("an error quotes the URL:\n%v", err)
	}
	type want struct {
		field string
		line  int
		kind  error
		msg   string
	}
	wants := []want{
		{"notifications[0].type", 7, application.ErrInvalid, `"email" is not slack or webhook`},
		{"notifications[0].urlFile", 8, application.ErrInvalid, "not the URL itself"},
		{"notifications[0].events[1]", 9, application.ErrInvalid, `"sync.exploded" is not an event type`},
		{"notifications[0].events[2]", 9, application.ErrDuplicate, "listed twice"},
		{"notifications[0].services", 10, application.ErrInvalid, "add it to events"},
		{"notifications[0].applications[0]", 11, application.ErrInvalid, `"billing" is not an application`},
		{"notifications[1].name", 13, application.ErrDuplicate, "already used by notifications[0]"},
		{"notifications[1].urlFile", 13, application.ErrRequired, "urlFile or urlEnv"},
		{"notifications[1].headers", 15, application.ErrInvalid, "only a webhook sink"},
		{"notifications[2]", 16, application.ErrInvalid, "not both"},
		{"notifications[2].template", 20, application.ErrInvalid, "parse template"},
		{"notifications[2].headers[0].name", 22, application.ErrInvalid, "credentials are never written inline"},
		{"notifications[2].headers[2].name", 24, application.ErrDuplicate, "set twice"},
		{"notifications[2].headers[3].name", 25, application.ErrInvalid, "not an HTTP header name"},
		{"notifications[3].urlEnv", 28, application.ErrInvalid, "not the URL itself"},
		{"notifications[3].url", 29, application.ErrUnknownField, `unknown field "url"`},
	}
	var got []*fault.Error
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *fault.Error
		if !errors.As(e, &fe) {
			t.Fatalf("not a *fault.Error: %v", e)
		}
		got = append(got, fe)
	}
	for _, w := range wants {
		found := false
		for _, fe := range got {
			if fe.Field == w.field && strings.Contains(fe.Err.Error(), w.msg) {
				found = true
				if fe.Line != w.line || !errors.Is(fe, w.kind) || fe.File != "apps.yaml" {
					t.Errorf("%s: line %d kind ok %v file %q; want line %d, %v", w.field, fe.Line, errors.Is(fe, w.kind), fe.File, w.line, w.kind)
				}
			}
		}
		if !found {
			t.Errorf("no problem at %s saying %q", w.field, w.msg)
		}
	}
	if len(got) != len(wants) {
		t.Errorf("%d problems, want %d:\n%v", len(got), len(wants), err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"7", 7 * time.Second},
		{"0", 0},
		{"-3", 0},
		{"soon", 0},
		{"99999999999999999", maxRetryAfter},
		{now.Add(90 * time.Second).Format(http1123), 90 * time.Second},
		{now.Add(-time.Minute).Format(http1123), 0},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

const http1123 = "Mon, 02 Jan 2006 15:04:05 GMT"

func TestBackoff(t *testing.T) {
	b := Backoff{Min: time.Second, Max: 5 * time.Second}
	for failures, ceiling := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 5 * time.Second, 60: 5 * time.Second} {
		for range 100 {
			if d := backoff(b, failures); d < ceiling/2 || d > ceiling {
				t.Fatalf("backoff after %d failures = %v, want in [%v, %v]", failures, d, ceiling/2, ceiling)
			}
		}
	}
}

func TestScrub(t *testing.T) {
	raw := "https://hooks.example.com/services/T0/B0/SECRET?x=1"
	err := scrub(errors.New(`Post "`+raw+`": dial tcp: refused; path /services/T0/B0/SECRET`), raw)
	if strings.Contains(err.Error(), "SECRET") || !strings.Contains(err.Error(), "dial tcp: refused") {
		t.Errorf("scrubbed: %v", err)
	}
}
