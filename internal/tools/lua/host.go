package lua

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	glua "github.com/yuin/gopher-lua"
)

// maxSleep bounds one sleep; a call's time limit ends it sooner anyway.
const maxSleep = 24 * time.Hour

// openHost installs the host API as globals (docs/lua-tools.md): tool{},
// sleep, now, print, and the read-only modules json, http and log.
func (r *runner) openHost() {
	L := r.L
	r.kinds.null.Metatable = lockedMeta(L, "null", nil)
	L.SetGlobal("tool", L.NewFunction(r.declare))
	L.SetGlobal("sleep", L.NewFunction(r.sleep))
	L.SetGlobal("now", L.NewFunction(hostNow))
	L.SetGlobal("print", L.NewFunction(r.print))
	L.SetGlobal("json", module(L, "json", map[string]glua.LValue{
		"encode": L.NewFunction(r.jsonEncode),
		"decode": L.NewFunction(r.jsonDecode),
		"null":   r.kinds.null,
		"array":  L.NewFunction(r.mark("array", r.kinds.arrayMT)),
		"object": L.NewFunction(r.mark("object", r.kinds.objectMT)),
	}))
	L.SetGlobal("http", module(L, "http", map[string]glua.LValue{
		"request": L.NewFunction(r.httpRequest),
		"get":     L.NewFunction(r.httpGet),
	}))
	L.SetGlobal("log", module(L, "log", map[string]glua.LValue{
		"debug": L.NewFunction(r.logAt(slog.LevelDebug)),
		"info":  L.NewFunction(r.logAt(slog.LevelInfo)),
		"warn":  L.NewFunction(r.logAt(slog.LevelWarn)),
		"error": L.NewFunction(r.logAt(slog.LevelError)),
	}))
	for name, fn := range r.src.opts.hooks {
		L.SetGlobal(name, L.NewFunction(fn))
	}
}

// module returns a host module as a userdata whose fields are read through a
// locked metatable: a script cannot add, replace or remove a field, rawset
// it (it is no table) or swap its metatable.
func module(L *glua.LState, name string, fields map[string]glua.LValue) *glua.LUserData {
	index := newTable()
	for k, v := range fields {
		index.RawSetString(k, v)
	}
	return &glua.LUserData{Value: name, Metatable: lockedMeta(L, name, index)}
}

// lockedMeta is a metatable that refuses new fields and cannot be read or
// replaced from Lua (getmetatable answers "locked").
func lockedMeta(L *glua.LState, name string, index *glua.LTable) *glua.LTable {
	mt := newTable()
	if index != nil {
		mt.RawSetString("__index", index)
	}
	mt.RawSetString("__newindex", L.NewFunction(func(L *glua.LState) int {
		L.RaiseError("%s is read-only", name)
		return 0
	}))
	mt.RawSetString("__tostring", L.NewFunction(func(L *glua.LState) int {
		L.Push(glua.LString(name))
		return 1
	}))
	mt.RawSetString("__metatable", glua.LString("locked"))
	return mt
}

// suspend makes a host function wait for w: it stores w on the running call
// and yields to the loop, which runs w and resumes the call with what
// w.finish returns. Waiting is refused where a coroutine cannot yield.
func (r *runner) suspend(L *glua.LState, what string, w *wait) int {
	cs := r.running
	switch {
	case cs == nil:
		L.RaiseError("%s cannot wait while the scripts load; call it from a handler", what)
	case cs.wait != nil || !yieldable(L):
		L.RaiseError("%s cannot wait inside a function called by Go code (a table.sort comparator, a string.gsub replacement, a metamethod); call it from the handler", what)
	}
	cs.wait = w
	return L.Yield(r.marker)
}

// yieldable reports whether no Go function sits between the running
// function and the bottom of its coroutine: a yield cannot cross one.
func yieldable(L *glua.LState) bool {
	for level := 1; level <= stateOptions.CallStackSize; level++ {
		dbg, ok := L.GetStack(level)
		if !ok {
			return true
		}
		if _, err := L.GetInfo("S", dbg, glua.LNil); err != nil {
			return true
		}
		switch dbg.What {
		case "G":
			return false
		case "main":
			return true
		}
	}
	return true
}

// sleep(seconds) waits without blocking other calls.
func (r *runner) sleep(L *glua.LState) int {
	secs := float64(L.CheckNumber(1))
	if math.IsNaN(secs) || secs < 0 {
		L.ArgError(1, "seconds must be a number >= 0")
	}
	d := maxSleep
	if secs < maxSleep.Seconds() {
		d = time.Duration(secs * float64(time.Second))
	}
	return r.suspend(L, "sleep", &wait{
		run: func(ctx context.Context) (any, error) {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
				return nil, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
		finish: func(any, error) []glua.LValue { return nil },
	})
}

// now() is the Unix time in seconds, with a fraction.
func hostNow(L *glua.LState) int {
	L.Push(glua.LNumber(float64(time.Now().UnixMicro()) / 1e6))
	return 1
}

func (r *runner) jsonEncode(L *glua.LState) int {
	b, err := r.kinds.encode(L.CheckAny(1))
	if err != nil {
		L.RaiseError("json.encode: %v", err)
	}
	L.Push(glua.LString(b))
	return 1
}

func (r *runner) jsonDecode(L *glua.LState) int {
	v, err := r.kinds.decode([]byte(L.CheckString(1)))
	if err != nil {
		L.RaiseError("json.decode: %v", err)
	}
	L.Push(v)
	return 1
}

// mark returns json.array or json.object: it marks a table (a new one if
// none is given) so it encodes as that kind even when empty.
func (r *runner) mark(kind string, mt *glua.LTable) glua.LGFunction {
	return func(L *glua.LState) int {
		t := L.OptTable(1, newTable())
		if cur := t.Metatable; cur != glua.LNil && cur != r.kinds.arrayMT && cur != r.kinds.objectMT {
			L.ArgError(1, "json."+kind+" cannot mark a table that has a metatable of its own")
		}
		t.Metatable = mt
		L.Push(t)
		return 1
	}
}

// logAt returns log.debug/info/warn/error(msg, fields): a record in the
// server's log with the source's name, the running call and fields.
func (r *runner) logAt(level slog.Level) glua.LGFunction {
	return func(L *glua.LState) int {
		msg := L.ToStringMeta(L.CheckAny(1)).String()
		attrs := r.callAttrs()
		if fields, ok := L.Get(2).(*glua.LTable); ok {
			attrs = append(attrs, r.fieldAttrs(fields)...)
		}
		r.src.log.LogAttrs(context.Background(), level, msg, attrs...)
		return 0
	}
}

// print(...) logs its arguments, like log.info, instead of writing to
// standard output.
func (r *runner) print(L *glua.LState) int {
	parts := make([]string, L.GetTop())
	for i := range parts {
		parts[i] = L.ToStringMeta(L.Get(i + 1)).String()
	}
	r.src.log.LogAttrs(context.Background(), slog.LevelInfo, strings.Join(parts, "\t"), r.callAttrs()...)
	return 0
}

// callAttrs names the running call in a log record.
func (r *runner) callAttrs() []slog.Attr {
	cs := r.running
	if cs == nil {
		return nil
	}
	return []slog.Attr{slog.String("tool", cs.call.Name), slog.String("call", cs.call.ID), slog.String("chat", cs.call.ChatID)}
}

// fieldAttrs turns a table of fields into attributes, sorted by key; a value
// JSON cannot hold is logged as its tostring.
func (r *runner) fieldAttrs(t *glua.LTable) []slog.Attr {
	var attrs []slog.Attr
	t.ForEach(func(k, v glua.LValue) {
		g, err := r.kinds.toGo(v)
		if err != nil {
			g = v.String()
		}
		attrs = append(attrs, slog.Any(k.String(), g))
	})
	slices.SortFunc(attrs, func(a, b slog.Attr) int { return strings.Compare(a.Key, b.Key) })
	return attrs
}
