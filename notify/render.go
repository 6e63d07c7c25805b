package notify

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/template"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/events"
)

// maxText bounds a rendered notification. Longer text is cut, so a
// template looping over a large value cannot build an unbounded body.
const maxText = 8 << 10

var errTooLong = errors.New("text too long")

// render returns the notification text for e. When the sink's template
// fails on this event, the text comes from the type's default template and
// the error says why.
func (s *sink) render(e events.Event) (string, error) {
	data := e
	if s.kind == application.NotifySlack {
		data = slackEscape(e)
	}
	text, err := execute(s.tmpl, data)
	if err == nil {
		return text, nil
	}
	text, ferr := execute(s.fallback, data)
	if ferr != nil {
		// The default templates use no function that can fail; keep
		// something readable anyway.
		text = fmt.Sprintf("%s %s", data.App, data.Type)
	}
	return text, fmt.Errorf("render template: %w", err)
}

func execute(t *template.Template, data events.Event) (string, error) {
	var w limitWriter
	err := t.Execute(&w, data)
	if errors.Is(err, errTooLong) {
		return strings.ToValidUTF8(w.b.String(), "") + "…", nil
	}
	if err != nil {
		return "", err
	}
	return w.b.String(), nil
}

// limitWriter keeps the first maxText bytes and then fails, which stops the
// template.
type limitWriter struct{ b strings.Builder }

func (w *limitWriter) Write(p []byte) (int, error) {
	room := maxText - w.b.Len()
	if len(p) > room {
		w.b.Write(p[:room])
		return room, errTooLong
	}
	return w.b.Write(p)
}

// slackMarkup escapes what Slack reads as markup in text: <!channel>
// mentions and <url|label> links. Only the event's values are escaped, not
// the template, so an operator can still write links of their own.
var slackMarkup = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

func slackEscape(e events.Event) events.Event {
	e.Type = events.Type(slackMarkup.Replace(string(e.Type)))
	e.App = slackMarkup.Replace(e.App)
	e.Stack = slackMarkup.Replace(e.Stack)
	e.Service = slackMarkup.Replace(e.Service)
	e.Revision = slackMarkup.Replace(e.Revision)
	e.Message = slackMarkup.Replace(e.Message)
	return e
}

// webhookBody is what a generic webhook receives: the event as the API
// serves it, plus the rendered text and how many repeats it stands for.
type webhookBody struct {
	events.Event
	Text       string `json:"text"`
	Suppressed int    `json:"suppressed,omitempty"`
}

// slackBody is the one field every Slack-compatible incoming webhook reads.
type slackBody struct {
	Text string `json:"text"`
}

// body encodes the request for e; similar is how many repeats of it were
// suppressed since it was last delivered.
func (s *sink) body(e events.Event, text string, similar int) ([]byte, error) {
	if similar > 0 {
		text += fmt.Sprintf(" (%d similar suppressed)", similar)
	}
	var v any = slackBody{Text: text}
	if s.kind == application.NotifyWebhook {
		v = webhookBody{Event: e, Text: text, Suppressed: similar}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode notification: %w", err)
	}
	return b, nil
}
