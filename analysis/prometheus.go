package analysis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/flotilla-gitops/flotilla/rollout"
	"github.com/flotilla-gitops/flotilla/router"
)

// MaxPrometheusAnswer bounds a Prometheus server's answer to one query: the
// check reads a single number, and a query that selects thousands of
// series must not make the controller hold them all.
const MaxPrometheusAnswer = 1 << 20

// IntervalPlaceholder in a query is replaced by the length of the interval
// judged, in PromQL's duration syntax ("30s", "1m30s"), so that
// `rate(x[$interval])` covers exactly the traffic the verdict is about. A
// compose file spells it $$interval: compose interpolation makes that "$".
const IntervalPlaceholder = "$interval"

// errAnswerTooLong is the read error of an answer past MaxPrometheusAnswer.
var errAnswerTooLong = fmt.Errorf("answer longer than %d bytes", MaxPrometheusAnswer)

// queryPrometheus judges the interval from..to by pc's query, evaluated at
// to: its single value passes at most pc.Max and fails above it. Anything
// that is not exactly one number (no series, several, NaN, an error, no
// answer in time) is Inconclusive, with why. pc.Address is never part of
// what it returns: it may carry credentials.
func (r *Runner) queryPrometheus(ctx context.Context, pc rollout.PrometheusCheck, every time.Duration, from, to time.Time) Judgement {
	inconclusive := func(why string) Judgement { return Judgement{rollout.Inconclusive, "prometheus", why} }
	client, err := api.NewClient(api.Config{Address: pc.Address, Client: r.prometheusClient()})
	if err != nil {
		return inconclusive("address: " + router.HideURL(err).Error())
	}
	ctx, cancel := context.WithTimeout(ctx, min(CallTimeout, every))
	defer cancel()
	query := ExpandQuery(pc.Query, to.Sub(from))
	val, _, _, err := promv1.NewAPI(client).Query(ctx, query, to)
	if err != nil {
		return inconclusive(queryError(ctx, err))
	}
	x, why := single(val)
	if why != "" {
		return inconclusive(why)
	}
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return inconclusive(fmt.Sprintf("the query's value is %v", x))
	}
	if x > pc.Max {
		return Judgement{rollout.Fail, "prometheus", overLimit(x, pc.Max)}
	}
	return Judgement{Result: rollout.Pass}
}

// ExpandQuery replaces IntervalPlaceholder in query by d, rounded up to
// whole seconds (PromQL ranges below a second read nothing useful).
func ExpandQuery(query string, d time.Duration) string {
	if !strings.Contains(query, IntervalPlaceholder) {
		return query
	}
	secs := max(time.Second, (d + time.Second - 1).Truncate(time.Second))
	return strings.ReplaceAll(query, IntervalPlaceholder, model.Duration(secs).String())
}

// single is the one number val holds: a scalar, or a vector of exactly one
// sample; otherwise why it holds none.
func single(val model.Value) (float64, string) {
	switch v := val.(type) {
	case *model.Scalar:
		return float64(v.Value), ""
	case model.Vector:
		switch len(v) {
		case 1:
			return float64(v[0].Value), ""
		case 0:
			return 0, "the query returned no series"
		}
		return 0, fmt.Sprintf("the query returned %d series, not one (aggregate it, e.g. with sum or max)", len(v))
	case nil:
		return 0, "the answer holds no result"
	}
	return 0, fmt.Sprintf("the query returned a %s, not a scalar or an instant vector", val.Type())
}

// overLimit says by how much x exceeds limit, with the digits the limit
// has (at least two).
func overLimit(x, limit float64) string {
	l := strconv.FormatFloat(limit, 'f', -1, 64)
	prec := 2
	if i := strings.IndexByte(l, '.'); i >= 0 && len(l)-i-1 > prec {
		prec = len(l) - i - 1
	}
	return fmt.Sprintf("%.*f > %s", prec, x, l)
}

// queryError is what a status shows of a failed query: the server's own
// message for a refused query, the failure otherwise, never the address.
func queryError(ctx context.Context, err error) string {
	var pe *promv1.Error
	switch {
	case errors.Is(err, errAnswerTooLong):
		return errAnswerTooLong.Error()
	case ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded):
		return "no answer in time"
	case errors.As(err, &pe):
		switch pe.Type {
		case promv1.ErrServer, promv1.ErrClient:
			// The client's words for a status without an API error body.
			for _, p := range []string{"server error: ", "client error: "} {
				if code, ok := strings.CutPrefix(pe.Msg, p); ok {
					return "answered " + code
				}
			}
		case promv1.ErrBadResponse:
			return "answer is not the JSON expected: " + pe.Msg
		}
		return fmt.Sprintf("query refused (%s): %s", pe.Type, pe.Msg)
	}
	return "query: " + router.HideURL(err).Error()
}

// prometheusClient is r.httpClient limited to answers of
// MaxPrometheusAnswer.
func (r *Runner) prometheusClient() *http.Client {
	c := r.httpClient()
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = limitedTransport{next}
	return c
}

// limitedTransport fails the reading of a body past MaxPrometheusAnswer.
type limitedTransport struct{ next http.RoundTripper }

func (t limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{rc: resp.Body, left: MaxPrometheusAnswer}
	return resp, nil
}

type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly the limit from a longer one.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, errAnswerTooLong
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
