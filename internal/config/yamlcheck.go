package config

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// decodeFile decodes a configuration file's text into cfg. It reads the
// text as a node tree first, so that an unknown key is reported by its key
// path and line, with the nearest known key of its level; the tree is
// returned to give the checks' errors their lines too (nil for a file with
// no content).
func decodeFile(raw []byte, cfg *Config) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, syntaxError(raw, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, nil // empty, or comments only
	}
	if err := unknownKey(doc.Content[0], reflect.TypeFor[Config](), ""); err != nil {
		return nil, err
	}
	if err := doc.Decode(cfg); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) { // one line, without "yaml: unmarshal errors:"
			return nil, errors.New(strings.Join(te.Errors, "; "))
		}
		return nil, locate(doc.Content[0], err)
	}
	return doc.Content[0], nil
}

// unknownKey walks n against t (the struct fields' yaml tags) and returns
// an error for the first key t does not have. at is n's key path.
func unknownKey(n *yaml.Node, t reflect.Type, at string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		keys := yamlKeys(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Tag == "!!merge" { // <<: *anchor, or a list of them
				merged := []*yaml.Node{v}
				if v.Kind == yaml.SequenceNode {
					merged = v.Content
				}
				for _, m := range merged {
					if err := unknownKey(m, t, at); err != nil {
						return err
					}
				}
				continue
			}
			f, ok := keys[k.Value]
			if !ok {
				return unknownKeyError(k, at, keys)
			}
			if err := unknownKey(v, f.Type, join(at, k.Value)); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		for i, item := range n.Content {
			if err := unknownKey(item, t.Elem(), fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := unknownKey(n.Content[i+1], t.Elem(), join(at, n.Content[i].Value)); err != nil {
				return err
			}
		}
	}
	return nil // a scalar, or a node of the wrong kind, which Decode reports
}

// yamlKeys maps the yaml keys of a struct's fields to the fields.
func yamlKeys(t reflect.Type) map[string]reflect.StructField {
	keys := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name != "-" && f.IsExported() {
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			keys[name] = f
		}
	}
	return keys
}

func unknownKeyError(k *yaml.Node, at string, keys map[string]reflect.StructField) error {
	known := make([]string, 0, len(keys))
	for name := range keys {
		known = append(known, name)
	}
	slices.Sort(known)
	msg := fmt.Sprintf("line %d: unknown key %q", k.Line, k.Value)
	if at != "" {
		msg += " in " + at
	}
	if s := nearest(k.Value, known); s != "" {
		return fmt.Errorf("%s; did you mean %q?", msg, s)
	}
	where := "at the top level"
	if at != "" {
		where = "in " + at
	}
	return fmt.Errorf("%s; the keys %s are %s", msg, where, strings.Join(known, ", "))
}

// nearest is the candidate closest to s by edit distance, if it is close
// enough to be a likely typo: at most 2 edits, and fewer than half of s.
func nearest(s string, candidates []string) string {
	best, bestD := "", 0
	for _, c := range candidates {
		if d := editDistance(s, c); best == "" || d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" || bestD > 2 || 2*bestD >= len(s) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func join(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}

// leadingPath is the key path a check's message starts with, like
// "models[0]" in `models[0] (a): provider "x" is not one of ...`, and the
// rest of the message after it (and after the entry's name).
var leadingPath = regexp.MustCompile(`^([a-z_]+(?:\[\d+\])?(?:\.[a-z_]+(?:\[\d+\])?)*)(?: \([^)]*\))?:? `)

// firstKey is the key a message names first, like "provider" in
// `provider "x" is not one of ...`.
var firstKey = regexp.MustCompile(`^([a-z_]+)(?:[ :]|$)`)

// lineOf is the line, in the file's tree doc, of what a check's error is
// about: the key its message starts with, or the key inside that entry it
// names next. 0 if the file does not have it, or if it has it but the
// value checked came from elsewhere (a top-level key in notFromFile).
func lineOf(doc *yaml.Node, err error, notFromFile map[string]bool) int {
	m := leadingPath.FindStringSubmatch(err.Error())
	if doc == nil || m == nil {
		return 0
	}
	path := m[1]
	top, _, _ := strings.Cut(path, ".")
	if notFromFile[strings.Split(top, "[")[0]] {
		return 0
	}
	key, n := find(doc, path)
	if n == nil {
		return 0
	}
	line := key.Line
	if k := firstKey.FindStringSubmatch(err.Error()[len(m[0]):]); k != nil && n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k[1] {
				line = n.Content[i].Line
			}
		}
	}
	return line
}

// find returns the node at a key path like "tools.mcp[1]" and the node
// that names it (its key, or itself for a list entry).
func find(n *yaml.Node, path string) (key, value *yaml.Node) {
	key = n
	for part := range strings.SplitSeq(path, ".") {
		name, index, hasIndex := strings.Cut(part, "[")
		if n.Kind != yaml.MappingNode {
			return nil, nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == name {
				key, next = n.Content[i], n.Content[i+1]
			}
		}
		if next == nil {
			return nil, nil
		}
		n = next
		if hasIndex {
			i, err := strconv.Atoi(strings.TrimSuffix(index, "]"))
			if err != nil || n.Kind != yaml.SequenceNode || i >= len(n.Content) {
				return nil, nil
			}
			n = n.Content[i]
			key = n
		}
	}
	return key, n
}

// located gives a check's error the line it is about in the file, if the
// file has it.
func located(file string, doc *yaml.Node, err error, notFromFile map[string]bool) error {
	if line := lineOf(doc, err, notFromFile); line > 0 {
		return fmt.Errorf("config %s: line %d: %w", file, line, err)
	}
	return fmt.Errorf("config: %w", err)
}

// errUnknownProvider is the check's error for a model's provider that is
// not one of Providers, with the nearest one, or how to reach a local
// OpenAI-compatible server.
func errUnknownProvider(i int, name, provider string) error {
	msg := fmt.Sprintf("models[%d] (%s): provider %q is not one of %s", i, name, provider, strings.Join(Providers, ", "))
	switch p := strings.ToLower(provider); {
	case p == "ollama":
		msg += "; Ollama serves the OpenAI API: use provider: openai with base_url: http://127.0.0.1:11434/v1"
	case slices.Contains([]string{"vllm", "llamacpp", "llama.cpp", "llama-cpp", "lmstudio", "openrouter", "localai"}, p):
		msg += fmt.Sprintf("; %s serves the OpenAI API: use provider: openai with its base_url", provider)
	case nearest(p, Providers) != "":
		msg += fmt.Sprintf("; did you mean %q?", nearest(p, Providers))
	}
	return errors.New(msg)
}
