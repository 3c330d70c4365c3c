package lua

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	glua "github.com/yuin/gopher-lua"
)

// maxDepth bounds the nesting of a value converted between Lua and JSON.
const maxDepth = 200

// jsonKinds holds the values that steer the conversion between Lua and JSON
// in one Lua state: the json.null sentinel and the metatables json.array and
// json.object put on a table to fix its kind.
type jsonKinds struct {
	L        *glua.LState // makes tables; used on the state's goroutine only
	null     *glua.LUserData
	arrayMT  *glua.LTable
	objectMT *glua.LTable
}

func newJSONKinds(L *glua.LState) *jsonKinds {
	return &jsonKinds{
		L:        L,
		null:     &glua.LUserData{Value: "json.null", Metatable: glua.LNil},
		arrayMT:  newTable(),
		objectMT: newTable(),
	}
}

// newTable returns an empty table; gopher-lua's zero LTable needs its
// Metatable set to LNil.
func newTable() *glua.LTable { return &glua.LTable{Metatable: glua.LNil} }

// convError is a value that cannot become JSON, with where it sits.
type convError struct {
	path []string // innermost first
	msg  string
}

func (e *convError) Error() string {
	p := "$"
	for i := len(e.path) - 1; i >= 0; i-- {
		p += e.path[i]
	}
	if p == "$" {
		return e.msg
	}
	return fmt.Sprintf("%s (at %s)", e.msg, p)
}

func (e *convError) at(seg string) *convError {
	e.path = append(e.path, seg)
	return e
}

// toGo converts a Lua value to what encoding/json encodes as the same JSON:
// nil and json.null become null; booleans, numbers and strings map to
// themselves; a table is an array when json.array marked it or its keys are
// exactly 1..n (n >= 1), an object otherwise (so an empty table is {}, unless
// marked). Object keys are strings, or numbers written as decimals. Cycles,
// functions, coroutines, other userdata, NaN and infinities are errors.
func (k *jsonKinds) toGo(v glua.LValue) (any, error) {
	out, err := k.value(v, map[*glua.LTable]bool{}, 0)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (k *jsonKinds) value(v glua.LValue, seen map[*glua.LTable]bool, depth int) (any, *convError) {
	switch v := v.(type) {
	case *glua.LNilType:
		return nil, nil
	case glua.LBool:
		return bool(v), nil
	case glua.LNumber:
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, &convError{msg: fmt.Sprintf("cannot convert the number %v to JSON", f)}
		}
		return f, nil
	case glua.LString:
		return string(v), nil
	case *glua.LUserData:
		if v == k.null {
			return nil, nil
		}
		return nil, &convError{msg: "cannot convert a userdata to JSON"}
	case *glua.LTable:
		if depth >= maxDepth {
			return nil, &convError{msg: fmt.Sprintf("cannot convert to JSON: nested deeper than %d levels", maxDepth)}
		}
		if seen[v] {
			return nil, &convError{msg: "cannot convert to JSON: the table contains itself (a cycle)"}
		}
		seen[v] = true
		defer delete(seen, v)
		return k.table(v, seen, depth+1)
	default:
		return nil, &convError{msg: fmt.Sprintf("cannot convert a %s to JSON", v.Type())}
	}
}

func (k *jsonKinds) table(t *glua.LTable, seen map[*glua.LTable]bool, depth int) (any, *convError) {
	switch t.Metatable {
	case k.arrayMT:
		return k.array(t, t.MaxN(), seen, depth)
	case k.objectMT:
		return k.object(t, seen, depth)
	}
	count, seq := 0, true
	t.ForEach(func(key, _ glua.LValue) {
		count++
		if seq {
			n, ok := key.(glua.LNumber)
			seq = ok && float64(n) >= 1 && float64(n) == math.Trunc(float64(n))
		}
	})
	if count > 0 && seq && t.MaxN() == count {
		return k.array(t, count, seen, depth)
	}
	return k.object(t, seen, depth)
}

func (k *jsonKinds) array(t *glua.LTable, n int, seen map[*glua.LTable]bool, depth int) (any, *convError) {
	out := make([]any, n)
	for i := range n {
		v, err := k.value(t.RawGetInt(i+1), seen, depth)
		if err != nil {
			return nil, err.at(fmt.Sprintf("[%d]", i+1))
		}
		out[i] = v
	}
	return out, nil
}

func (k *jsonKinds) object(t *glua.LTable, seen map[*glua.LTable]bool, depth int) (any, *convError) {
	out := map[string]any{}
	var err *convError
	t.ForEach(func(key, val glua.LValue) {
		if err != nil {
			return
		}
		var name string
		switch key := key.(type) {
		case glua.LString:
			name = string(key)
		case glua.LNumber:
			name = formatNumber(float64(key))
		default:
			err = &convError{msg: fmt.Sprintf("cannot convert to JSON: a table key is a %s (object keys must be strings or numbers)", key.Type())}
			return
		}
		v, e := k.value(val, seen, depth)
		if e != nil {
			err = e.at(pathKey(name))
			return
		}
		out[name] = v
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func formatNumber(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func pathKey(name string) string {
	if name != "" && strings.IndexFunc(name, func(r rune) bool {
		return !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) < 0 {
		return "." + name
	}
	return fmt.Sprintf("[%q]", name)
}

// encode converts a Lua value to JSON text.
func (k *jsonKinds) encode(v glua.LValue) ([]byte, error) {
	g, err := k.toGo(v)
	if err != nil {
		return nil, err
	}
	b, jerr := json.Marshal(g)
	if jerr != nil {
		return nil, fmt.Errorf("cannot convert to JSON: %v", jerr)
	}
	return b, nil
}

// decode converts JSON text to a Lua value: objects become tables, arrays
// become tables marked as arrays (so an empty one encodes back as []), null
// becomes json.null inside arrays and is left out of objects (so a member
// that is null reads as nil), numbers become Lua numbers (float64).
func (k *jsonKinds) decode(data []byte) (glua.LValue, error) {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return glua.LNil, err
	}
	return k.fromGo(v, 0)
}

func (k *jsonKinds) fromGo(v any, depth int) (glua.LValue, error) {
	if depth > maxDepth {
		return glua.LNil, fmt.Errorf("nested deeper than %d levels", maxDepth)
	}
	switch v := v.(type) {
	case nil:
		return k.null, nil
	case bool:
		return glua.LBool(v), nil
	case float64:
		return glua.LNumber(v), nil
	case string:
		return glua.LString(v), nil
	case []any:
		t := k.L.CreateTable(len(v), 0)
		t.Metatable = k.arrayMT
		for _, e := range v {
			lv, err := k.fromGo(e, depth+1)
			if err != nil {
				return glua.LNil, err
			}
			t.Append(lv)
		}
		return t, nil
	case map[string]any:
		t := k.L.CreateTable(0, len(v))
		for key, e := range v {
			if e == nil {
				continue
			}
			lv, err := k.fromGo(e, depth+1)
			if err != nil {
				return glua.LNil, err
			}
			t.RawSetString(key, lv)
		}
		return t, nil
	}
	return glua.LNil, fmt.Errorf("unexpected JSON value %T", v)
}
