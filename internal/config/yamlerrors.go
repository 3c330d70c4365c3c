package config

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// yamlLine matches the "yaml: line N: " a syntax error of the YAML parser
// starts with.
var yamlLine = regexp.MustCompile(`^yaml: (?:line \d+: )?`)

// syntaxError restates a syntax error of the YAML parser with the line the
// problem is on. The parser names the line where the enclosing block began
// (a list's, so a badly indented key on line 4 comes out as "line 1"); the
// first line whose text, with the lines before it, does not parse is where
// the problem is.
func syntaxError(raw []byte, err error) error {
	m := yamlLine.FindString(err.Error())
	if m == "" {
		return err
	}
	msg := err.Error()[len(m):]
	lines := bytes.SplitAfter(raw, []byte("\n"))
	end := 0
	for i, l := range lines {
		end += len(l)
		var doc yaml.Node
		if yaml.Unmarshal(raw[:end], &doc) != nil {
			return fmt.Errorf("line %d: %s", i+1, msg)
		}
	}
	return err
}

// valueError is a value of the file that is not of its key's kind, like a
// duration that does not parse; decodeFile names the key by its path.
type valueError struct {
	node *yaml.Node // the value, in the file's tree
	msg  string
}

func (e *valueError) Error() string { return fmt.Sprintf("line %d: %s", e.node.Line, e.msg) }

// locate restates a valueError with the path of its key in the tree root:
// "line 2: engine.lease_ttl: "5x" is not a duration ...".
func locate(root *yaml.Node, err error) error {
	var ve *valueError
	if !errors.As(err, &ve) {
		return err
	}
	if path := pathTo(root, ve.node, ""); path != "" {
		return fmt.Errorf("line %d: %s: %s", ve.node.Line, path, ve.msg)
	}
	return err
}

// pathTo returns the key path, from n (at at), of the value node target, or
// "" if n does not hold it.
func pathTo(n, target *yaml.Node, at string) string {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if v == target {
				return join(at, k.Value)
			}
			if p := pathTo(v, target, join(at, k.Value)); p != "" {
				return p
			}
		}
	case yaml.SequenceNode:
		for i, v := range n.Content {
			item := at + "[" + strconv.Itoa(i) + "]"
			if v == target {
				return item
			}
			if p := pathTo(v, target, item); p != "" {
				return p
			}
		}
	}
	return ""
}
