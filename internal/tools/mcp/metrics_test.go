package mcp

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestMetrics(t *testing.T) {
	m := NewMetrics()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(m); err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(0)
	cfg := Config{Name: "m", Command: []string{"unused"}}
	opts := fastOptions(t)
	opts.Metrics = m
	opts.transport = memTransport(ts)
	s := Open(cfg, opts)
	defer s.Close()
	waitConnected(t, s)
	if v := s.current0().cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Logf("in-memory protocol %s", v) // the tests assume the newest, but either works
	}
	invoke(t, s, call("m_echo", `{"msg":"x"}`), call("m_fail", `{}`), call("m_rpcfail", `{}`))

	got := gather(t, reg)
	want := map[string]float64{
		`parley_mcp_calls_total{server="m"}`:                      3,
		`parley_mcp_call_errors_total{server="m"}`:                2,
		`parley_mcp_call_duration_seconds{server="m"}`:            3, // observations
		`parley_mcp_session_state{server="m",state="ready"}`:      1,
		`parley_mcp_session_state{server="m",state="connecting"}`: 0,
		`parley_mcp_session_state{server="m",state="failed"}`:     0,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %v, want %v", k, got[k], w)
		}
	}
}

// gather returns every sample of reg by name{labels}: a counter's or
// gauge's value, a histogram's count.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName() + labels(m.GetLabel())
			switch {
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

func labels(ls []*dto.LabelPair) string {
	s := "{"
	for i, l := range ls {
		if i > 0 {
			s += ","
		}
		s += l.GetName() + `="` + l.GetValue() + `"`
	}
	return s + "}"
}
