package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/llm/catalog"
	"github.com/parleyhq/parley/internal/tools"
)

// facadeWarmup is how many requests of each kind run before the timed ones.
const facadeWarmup = 10

// facadeTiming is one request's times: to the first text delta (streamed
// only) and to the end of the answer.
type facadeTiming struct{ ttft, total time.Duration }

// facadeSeries are the sorted times of one kind of request on one path.
type facadeSeries struct{ ttft, stream, plain latencies }

// facadeCase is one kind of request, through the facade and directly.
type facadeCase struct {
	facade, direct facadeSeries
}

// facadeResult is what the facade measurement found: (a) a request with no
// tool call, (b) one whose first model answer calls the server-side tool.
type facadeResult struct{ text, tool facadeCase }

// measureFacade serves parley's API (with the OpenAI-compatible facade) on
// a loopback port over r, runs an engine with engine defaults whose one
// model is the fake OpenAI server (called by parley's openai provider over
// loopback) and whose registry has the server-side tool noop, and times
// requests of the official Go client: through the facade, and the same
// requests directly to the fake, interleaved. Each of n rounds (after
// facadeWarmup not counted) makes, for each case, a streamed and a
// non-streamed request on each path, the path that goes first alternating.
func measureFacade(ctx context.Context, r *replica, n int, log *slog.Logger) (facadeResult, error) {
	var res facadeResult
	fake, err := startFakeModel()
	if err != nil {
		return res, err
	}
	defer fake.stop()

	cfg := config.Default()
	cfg.Models = []config.Model{{Name: modelName, Provider: "openai", Model: "bench-model", BaseURL: fake.url, APIKeyEnv: "PARLEY_BENCH_FAKE_KEY"}}
	cfg.DefaultModel = modelName
	cat, err := catalog.New(&cfg, func(string) string { return "bench-key" }, slog.New(slog.DiscardHandler))
	if err != nil {
		return res, fmt.Errorf("models: %w", err)
	}
	reg, err := noopRegistry()
	if err != nil {
		return res, err
	}
	// As `parley serve` starts its engine (cmd/parley/runtime.go).
	ec := engine.DefaultConfig()
	ec.MaxSteps = cfg.Limits.MaxSteps
	ec.ToolResultTimeout = time.Duration(cfg.Limits.ToolResultTimeout)
	stopEngine := runEngine(engine.New(ec, r.st, r.ps, cat, tools.NewDispatcher(reg, tools.Options{}, log), log))
	defer stopEngine()

	h, err := api.New(api.Deps{Config: &cfg, Store: r.st, PubSub: r.ps, Logger: log, Tools: reg})
	if err != nil {
		return res, err
	}
	url, stopAPI, err := serveHandler(h)
	if err != nil {
		return res, err
	}
	defer stopAPI()
	if err := createOwner(ctx, r.st); err != nil {
		return res, err
	}
	token, _, err := auth.Issue(ctx, r.st, owner, "bench")
	if err != nil {
		return res, err
	}
	newClient := func(base, key string) (openai.Client, func()) {
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
		return openai.NewClient(option.WithBaseURL(base), option.WithAPIKey(key), option.WithMaxRetries(0), option.WithHTTPClient(hc)),
			hc.CloseIdleConnections
	}
	viaFacade, closeF := newClient(url+"/v1", token)
	defer closeF()
	direct, closeD := newClient(fake.url, "bench-key")
	defer closeD()

	// The client declares no tool: noop is parley's. The direct requests
	// carry it as parley's provider offers it to the model.
	noop := openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
		Name: "noop", Description: openai.String("does nothing"), Parameters: openai.FunctionParameters{"type": "object"}})
	params := func(text string, withTool bool) openai.ChatCompletionNewParams {
		p := openai.ChatCompletionNewParams{Model: modelName, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)}}
		if withTool {
			p.Tools = []openai.ChatCompletionToolUnionParam{noop}
		}
		return p
	}
	textFacade, textDirect := params("say "+fakeText, false), params("say "+fakeText, true)
	toolFacade, toolDirect := params("call "+fakeCallWord, false), params("call "+fakeCallWord, true)

	type path struct {
		streamed func() (facadeTiming, error)
		plain    func() (time.Duration, error)
		into     *facadeSeries
	}
	paths := [][2]path{
		{ // (a) no tool call
			{func() (facadeTiming, error) { return streamOnce(ctx, viaFacade, textFacade, fakeText) },
				func() (time.Duration, error) { return plainOnce(ctx, viaFacade, textFacade, fakeText) }, &res.text.facade},
			{func() (facadeTiming, error) { return streamOnce(ctx, direct, textDirect, fakeText) },
				func() (time.Duration, error) { return plainOnce(ctx, direct, textDirect, fakeText) }, &res.text.direct},
		},
		{ // (b) one server-side call inside the request
			{func() (facadeTiming, error) { return streamOnce(ctx, viaFacade, toolFacade, fakeFinal) },
				func() (time.Duration, error) { return plainOnce(ctx, viaFacade, toolFacade, fakeFinal) }, &res.tool.facade},
			{func() (facadeTiming, error) { return directToolStream(ctx, direct, toolDirect) },
				func() (time.Duration, error) { return directToolPlain(ctx, direct, toolDirect) }, &res.tool.direct},
		},
	}
	names := [2][2]string{{"no tools, through the facade", "no tools, direct"}, {"one server-side tool, through the facade", "one server-side tool, direct"}}
	for i := range facadeWarmup + n {
		for c, pair := range paths {
			for k := range pair {
				j := (i + k) % 2 // each path first in turn
				p := pair[j]
				if err := ctx.Err(); err != nil {
					return res, err
				}
				st, err := p.streamed()
				if err != nil {
					return res, fmt.Errorf("%s, streamed: %w", names[c][j], err)
				}
				pl, err := p.plain()
				if err != nil {
					return res, fmt.Errorf("%s, not streamed: %w", names[c][j], err)
				}
				if i >= facadeWarmup {
					p.into.ttft = append(p.into.ttft, st.ttft)
					p.into.stream = append(p.into.stream, st.total)
					p.into.plain = append(p.into.plain, pl)
				}
			}
		}
	}
	// Per round: (a) 2 model calls through the facade and 2 direct, (b) 4
	// and 4. More would be a retry parley made.
	if got, want := fake.calls.Load(), int64(12*(facadeWarmup+n)); got != want {
		return res, fmt.Errorf("the fake model got %d calls, want %d", got, want)
	}
	for _, s := range []*facadeSeries{&res.text.facade, &res.text.direct, &res.tool.facade, &res.tool.direct} {
		slices.Sort(s.ttft)
		slices.Sort(s.stream)
		slices.Sort(s.plain)
	}
	return res, nil
}

// serveHandler serves h on a loopback port until stop.
func serveHandler(h http.Handler) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("listen: %w", err)
	}
	s := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go s.Serve(ln)
	return "http://" + ln.Addr().String(), func() { s.Close() }, nil
}

// streamOnce makes one streamed request and checks that its text is want;
// the first token is the first chunk with text.
func streamOnce(ctx context.Context, c openai.Client, p openai.ChatCompletionNewParams, want string) (facadeTiming, error) {
	start := time.Now()
	t, acc, err := readStream(ctx, c, p, start)
	if err != nil {
		return t, err
	}
	if got := acc.Choices[0].Message.Content; got != want || acc.Choices[0].FinishReason != "stop" {
		return t, fmt.Errorf("answer %q (finish %q), want %q", got, acc.Choices[0].FinishReason, want)
	}
	return t, nil
}

// readStream reads a streamed answer to its end; t.ttft is from start to
// the first chunk with text (0 if none), t.total from start to the end.
func readStream(ctx context.Context, c openai.Client, p openai.ChatCompletionNewParams, start time.Time) (facadeTiming, *openai.ChatCompletionAccumulator, error) {
	var t facadeTiming
	s := c.Chat.Completions.NewStreaming(ctx, p)
	defer s.Close()
	acc := &openai.ChatCompletionAccumulator{}
	for s.Next() {
		ch := s.Current()
		if t.ttft == 0 && len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
			t.ttft = time.Since(start)
		}
		acc.AddChunk(ch)
	}
	t.total = time.Since(start)
	if err := s.Err(); err != nil {
		return t, acc, err
	}
	if len(acc.Choices) != 1 {
		return t, acc, fmt.Errorf("%d choices", len(acc.Choices))
	}
	return t, acc, nil
}

// plainOnce makes one non-streamed request and checks its text.
func plainOnce(ctx context.Context, c openai.Client, p openai.ChatCompletionNewParams, want string) (time.Duration, error) {
	start := time.Now()
	r, err := c.Chat.Completions.New(ctx, p)
	d := time.Since(start)
	if err != nil {
		return d, err
	}
	if len(r.Choices) != 1 || r.Choices[0].Message.Content != want || r.Choices[0].FinishReason != "stop" {
		return d, fmt.Errorf("unexpected answer %s", r.RawJSON())
	}
	return d, nil
}

// toolFollowUp is the second model call of case (b): the first request's
// messages, the model's call and noop's result.
func toolFollowUp(p openai.ChatCompletionNewParams, m openai.ChatCompletionMessage) (openai.ChatCompletionNewParams, error) {
	if len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "noop" {
		return p, errors.New("the model's first answer is not one call of noop")
	}
	out, _ := json.Marshal(fakeText)
	p.Messages = append(slices.Clone(p.Messages), m.ToParam(), openai.ToolMessage(string(out), m.ToolCalls[0].ID))
	return p, nil
}

// directToolStream makes case (b)'s two model calls directly, streamed:
// the first token is the final answer's first text.
func directToolStream(ctx context.Context, c openai.Client, p openai.ChatCompletionNewParams) (facadeTiming, error) {
	start := time.Now()
	_, acc, err := readStream(ctx, c, p, start)
	if err != nil {
		return facadeTiming{}, err
	}
	next, err := toolFollowUp(p, acc.Choices[0].Message)
	if err != nil {
		return facadeTiming{}, err
	}
	t, acc, err := readStream(ctx, c, next, start)
	if err != nil {
		return t, err
	}
	if got := acc.Choices[0].Message.Content; got != fakeFinal {
		return t, fmt.Errorf("final answer %q, want %q", got, fakeFinal)
	}
	return t, nil
}

// directToolPlain makes case (b)'s two model calls directly, not streamed.
func directToolPlain(ctx context.Context, c openai.Client, p openai.ChatCompletionNewParams) (time.Duration, error) {
	start := time.Now()
	r, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		return 0, err
	}
	if len(r.Choices) != 1 {
		return 0, fmt.Errorf("unexpected answer %s", r.RawJSON())
	}
	next, err := toolFollowUp(p, r.Choices[0].Message)
	if err != nil {
		return 0, err
	}
	r, err = c.Chat.Completions.New(ctx, next)
	d := time.Since(start)
	if err != nil {
		return d, err
	}
	if len(r.Choices) != 1 || r.Choices[0].Message.Content != fakeFinal {
		return d, fmt.Errorf("unexpected final answer %s", r.RawJSON())
	}
	return d, nil
}

// facadeOverheadTarget bounds the facade's overhead per request, with or
// without a server-side tool: the median through the facade minus the
// median of the same model calls made directly. On the 2-core machine of
// docs/benchmarks.md it is about 2 ms; a real model call takes hundreds of
// milliseconds (docs/benchmarks.md says why 5 ms).
const facadeOverheadTarget = 5 * time.Millisecond

// facadeRows measures the OpenAI-compatible facade on SQLite against
// direct calls of the same fake model.
func (b *bench) facadeRows(ctx context.Context) {
	n := b.o.facadeRequests
	b.step("facade: %d rounds of requests through the OpenAI-compatible facade and directly to the fake model, SQLite", n)
	res, err := func() (facadeResult, error) {
		db, err := newSQLite()
		if err != nil {
			return facadeResult{}, err
		}
		defer func() {
			if err := db.drop(); err != nil {
				b.t.note("facade SQLite cleanup: %v", err)
			}
		}()
		r, err := db.open(ctx, b.log)
		if err != nil {
			return facadeResult{}, err
		}
		defer r.close()
		return measureFacade(ctx, r, n, b.log)
	}()
	if err != nil {
		b.t.failed("OpenAI-compatible facade, SQLite", err)
		return
	}
	p50p99 := func(l latencies) string {
		return fmt.Sprintf("%s (p99 %s)", ms(l.percentile(0.5)), ms(l.percentile(0.99)))
	}
	for _, c := range []struct {
		name   string
		res    facadeCase
		direct string
	}{
		{"no tools", res.text, "1 model call"},
		{"one server-side tool", res.tool, "2 model calls"},
	} {
		prefix := fmt.Sprintf("facade, SQLite, %s (%s requests)", c.name, thousands(int64(n)))
		measures := []struct {
			name     string
			via, dir latencies
		}{
			{"time to first token, streamed", c.res.facade.ttft, c.res.direct.ttft},
			{"total, streamed", c.res.facade.stream, c.res.direct.stream},
			{"total, not streamed", c.res.facade.plain, c.res.direct.plain},
		}
		for _, m := range measures {
			b.t.add(row{metric: fmt.Sprintf("%s: %s: median", prefix, m.name), value: p50p99(m.via),
				target: fmt.Sprintf("direct (%s) %s", c.direct, p50p99(m.dir))})
		}
		for _, m := range measures {
			over := m.via.percentile(0.5) - m.dir.percentile(0.5)
			b.t.add(limitRow(fmt.Sprintf("facade's overhead, SQLite, %s, %s (facade − direct): medians", c.name, m.name),
				ms(over), over, facadeOverheadTarget, fmt.Sprintf("< %s", ms(facadeOverheadTarget))))
		}
	}
}
