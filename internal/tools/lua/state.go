package lua

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"regexp"
	"strings"

	glua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"

	"github.com/parleyhq/parley/tool"
)

//go:embed prelude.lua
var preludeCode string

// prelude is compiled once; every state runs it.
var prelude = func() *glua.FunctionProto {
	chunk, err := parse.Parse(strings.NewReader(preludeCode), "=prelude")
	if err != nil {
		panic(err)
	}
	proto, err := glua.Compile(chunk, "=prelude")
	if err != nil {
		panic(err)
	}
	return proto
}()

// stateOptions size a state and each of its coroutines: small stacks that
// grow, so a coroutine per call stays cheap, with ceilings that turn runaway
// recursion into an error. Each coroutine has stacks of its own, so these
// bound one coroutine; maxNested bounds how many a call nests (every pcall
// is one), which bounds the stack memory of a call: at most maxNested
// coroutines of 1024 frames and 64Ki values (1 MiB) each. (gopher-lua's
// table.concat pushes every element on the stack, so tableConcat replaces
// it.)
var stateOptions = glua.Options{
	SkipOpenLibs:        true,
	CallStackSize:       1024,
	MinimizeStackMemory: true,
	RegistrySize:        256,
	RegistryGrowStep:    256,
	RegistryMaxSize:     1 << 16,
}

// maxNested bounds the coroutines a call runs inside one another. parley's
// pcall and xpcall run their function in a coroutine (so a host function
// can wait inside them), and gopher-lua's call stack limit is per
// coroutine: without this bound, recursion through pcall went on until the
// time limit, gigabytes deep. Lua 5.1 has the same limit of 200 nested
// calls of C functions such as pcall.
const maxNested = 200

// removed are the globals of the opened libraries that a script must not
// reach: loading code, the environment of functions, the collector.
var removed = []string{"dofile", "loadfile", "load", "loadstring", "require", "module",
	"getfenv", "setfenv", "newproxy", "collectgarbage", "_printregs"}

var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// newRunner builds a sandboxed state, runs the scripts in it (all within
// the load time limit) and collects the tools they declare. The runner is
// not started.
func (s *Source) newRunner(scripts *scriptSet) (*runner, error) {
	L := glua.NewState(stateOptions)
	r := &runner{
		src:         s,
		scripts:     scripts,
		L:           L,
		kinds:       newJSONKinds(L),
		tools:       map[string]*glua.LFunction{},
		calls:       map[*callState]struct{}{},
		inbox:       make(chan *batch),
		completions: make(chan completion, 64),
		retiring:    make(chan struct{}),
		closing:     make(chan struct{}),
		dead:        make(chan struct{}),
		exited:      make(chan struct{}),
	}
	r.marker = r.L.NewUserData()
	if err := r.load(); err != nil {
		r.L.Close()
		return nil, err
	}
	return r, nil
}

func (r *runner) load() error {
	L := r.L
	ctx, cancel := context.WithTimeout(context.Background(), r.src.opts.LoadTimeout)
	defer cancel()
	L.SetContext(ctx)
	defer L.RemoveContext()

	for _, lib := range []struct {
		name string
		open glua.LGFunction
	}{
		{glua.BaseLibName, glua.OpenBase},
		{glua.TabLibName, glua.OpenTable},
		{glua.StringLibName, glua.OpenString},
		{glua.MathLibName, glua.OpenMath},
		{glua.CoroutineLibName, glua.OpenCoroutine},
	} {
		L.Push(L.NewFunction(lib.open))
		L.Push(glua.LString(lib.name))
		if err := L.PCall(1, 0, nil); err != nil {
			return fmt.Errorf("open %s library: %w", lib.name, err)
		}
	}
	for _, name := range removed {
		L.SetGlobal(name, glua.LNil)
	}
	if tab, ok := L.GetGlobal("table").(*glua.LTable); ok {
		tab.RawSetString("concat", L.NewFunction(tableConcat))
	}
	if str, ok := L.GetGlobal("string").(*glua.LTable); ok {
		str.RawSetString("dump", glua.LNil)
		if rep, ok := str.RawGetString("rep").(*glua.LFunction); ok {
			str.RawSetString("rep", L.NewFunction(boundedRep(rep.GFunction)))
		}
		r.openPatterns(L, str)
	}
	// Before the prelude, which builds pcall, xpcall and the coroutine
	// functions on this resume.
	if co, ok := L.GetGlobal("coroutine").(*glua.LTable); ok {
		if resume, ok := co.RawGetString("resume").(*glua.LFunction); ok {
			co.RawSetString("resume", L.NewFunction(r.boundedResume(resume.GFunction)))
		}
	}
	L.Push(L.NewFunctionFromProto(prelude))
	L.Push(r.marker)
	if err := L.PCall(1, 1, nil); err != nil {
		return fmt.Errorf("prelude: %w", err)
	}
	base, ok := L.Get(-1).(*glua.LFunction)
	L.Pop(1)
	if !ok {
		return errors.New("prelude: no base function")
	}
	r.base = base
	r.openHost()

	r.loading = true
	defer func() { r.loading = false }()
	for _, f := range r.scripts.files {
		L.Push(L.NewFunctionFromProto(f.proto))
		if err := L.PCall(0, 0, nil); err != nil {
			msg := r.errorMessage(err)
			if ctx.Err() != nil {
				msg = fmt.Sprintf("still running after the load time limit of %s (%s)", r.src.opts.LoadTimeout, msg)
			}
			return fmt.Errorf("load %s: %s", f.name, msg)
		}
	}
	if len(r.decls) == 0 {
		return errors.New("the scripts declare no tool: call tool{name=..., handler=function(input) ... end}")
	}
	return nil
}

// declare is the tool{} global: it checks a declaration and records it.
func (r *runner) declare(L *glua.LState) int {
	if !r.loading {
		L.RaiseError("tool{} can only be called while the scripts load, not from a handler")
	}
	t := L.CheckTable(1)
	var name, desc string
	var handler *glua.LFunction
	var schema glua.LValue = glua.LNil
	var annotations glua.LValue = glua.LNil
	t.ForEach(func(k, v glua.LValue) {
		key, _ := k.(glua.LString)
		switch key {
		case "name":
			s, ok := v.(glua.LString)
			if !ok {
				L.RaiseError("tool{}: name must be a string")
			}
			name = string(s)
		case "description":
			s, ok := v.(glua.LString)
			if !ok {
				L.RaiseError("tool{}: description must be a string")
			}
			desc = string(s)
		case "handler":
			f, ok := v.(*glua.LFunction)
			if !ok {
				L.RaiseError("tool{}: handler must be a function")
			}
			handler = f
		case "input_schema":
			schema = v
		case "annotations":
			annotations = v
		default:
			L.RaiseError("tool{}: unknown field %s (want name, description, input_schema, annotations, handler)", k.String())
		}
	})
	if !toolNameRE.MatchString(name) {
		L.RaiseError("tool{}: name %q must match %s", name, toolNameRE)
	}
	if handler == nil {
		L.RaiseError("tool{} %q: handler (a function) is required", name)
	}
	if _, dup := r.tools[name]; dup {
		L.RaiseError("tool{}: %q is declared twice", name)
	}
	raw, err := r.kinds.inputSchema(schema)
	if err != nil {
		L.RaiseError("tool{} %q: %v", name, err)
	}
	ann, err := toolAnnotations(annotations)
	if err != nil {
		L.RaiseError("tool{} %q: %v", name, err)
	}
	r.tools[name] = handler
	r.decls = append(r.decls, tool.Decl{Name: name, Description: desc, InputSchema: raw, Annotations: ann})
	return 0
}

// toolAnnotations converts tool{}'s annotations table, such as
// {readOnlyHint = true, destructiveHint = false}: its keys are the MCP hint
// names and its values booleans. A hint left out stays absent; no table
// (nil) is no annotations.
func toolAnnotations(v glua.LValue) (*tool.Annotations, error) {
	if v == glua.LNil {
		return nil, nil
	}
	t, ok := v.(*glua.LTable)
	if !ok {
		return nil, fmt.Errorf("annotations must be a table like {readOnlyHint = true}, not a %s", v.Type())
	}
	a := &tool.Annotations{}
	var err error
	t.ForEach(func(k, v glua.LValue) {
		if err != nil {
			return
		}
		var hint **bool
		if key, ok := k.(glua.LString); ok {
			switch key {
			case "readOnlyHint":
				hint = &a.ReadOnlyHint
			case "destructiveHint":
				hint = &a.DestructiveHint
			case "idempotentHint":
				hint = &a.IdempotentHint
			case "openWorldHint":
				hint = &a.OpenWorldHint
			}
		}
		if hint == nil {
			err = fmt.Errorf("annotations: unknown hint %s (want readOnlyHint, destructiveHint, idempotentHint, openWorldHint)", k.String())
			return
		}
		b, ok := v.(glua.LBool)
		if !ok {
			err = fmt.Errorf("annotations: %s must be true or false, not a %s", k.String(), v.Type())
			return
		}
		val := bool(b)
		*hint = &val
	})
	return a, err
}

// maxRepBytes bounds what string.rep makes: one call could otherwise ask
// for more memory than the server has.
const maxRepBytes = 16 << 20

// boundedRep wraps string.rep with the maxRepBytes bound.
func boundedRep(rep glua.LGFunction) glua.LGFunction {
	return func(L *glua.LState) int {
		s, n := L.CheckString(1), L.CheckNumber(2)
		if float64(len(s))*float64(n) > maxRepBytes {
			L.RaiseError("string.rep: the result would be larger than %d bytes", maxRepBytes)
		}
		return rep(L)
	}
}

// boundedResume wraps coroutine.resume with the maxNested bound. r.nested
// counts the resumes under way, one inside another: a coroutine that yields
// has returned from its resume, so a call waiting for a host function
// holds none.
func (r *runner) boundedResume(resume glua.LGFunction) glua.LGFunction {
	return func(L *glua.LState) int {
		if r.nested >= maxNested {
			L.RaiseError("stack overflow: more than %d nested pcall, xpcall or coroutine calls", maxNested)
		}
		r.nested++
		defer func() { r.nested-- }()
		return resume(L)
	}
}

// tableConcat is gopher-lua's table.concat, quirks included, building the
// string directly rather than on the Lua stack, whose size is bounded.
func tableConcat(L *glua.LState) int {
	tbl := L.CheckTable(1)
	sep := L.OptString(2, "")
	n := tbl.Len()
	i, j := L.OptInt(3, 1), L.OptInt(4, n)
	if L.GetTop() == 3 && (i > n || i < 1) {
		L.Push(glua.LString(""))
		return 1
	}
	i, j = max(min(i, n), 1), min(j, n)
	var b strings.Builder
	for k := i; k <= j; k++ {
		v := tbl.RawGetInt(k)
		if !glua.LVCanConvToString(v) {
			L.RaiseError("invalid value (%s) at index %d in table for concat", v.Type().String(), k)
		}
		if k > i {
			b.WriteString(sep)
		}
		b.WriteString(glua.LVAsString(v))
	}
	L.Push(glua.LString(b.String()))
	return 1
}
