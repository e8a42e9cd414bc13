package tool

import (
	"bytes"
	"errors"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	textmessage "golang.org/x/text/message"
)

// Schema is a tool's input schema compiled for validation. Every user of the tools checks a
// call's arguments with it before the handler runs (Handler's contract): the MCP endpoint and
// the agents, so that a model reading a refusal reads the same one either way.
type Schema struct {
	s *jsonschema.Schema
}

// CompileSchema compiles t's input schema, as JSON Schema 2020-12 (the dialect MCP assumes when
// "$schema" is absent).
func CompileSchema(t Tool) (*Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(t.InputSchema))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	url := "tollgate-tool-" + t.Name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	compiled, err := c.Compile(url)
	if err != nil {
		return nil, err
	}
	return &Schema{s: compiled}, nil
}

// Check validates the arguments args (a JSON document) against the schema. The error says what
// is wrong: the document's parse error, or one "where: what" per failed constraint, joined with
// "; " ("limit: minimum: got 0, want 1").
func (s *Schema) Check(args []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return err
	}
	if err := s.s.Validate(v); err != nil {
		return errors.New(validationMessage(err))
	}
	return nil
}

// printer renders validation messages.
var printer = textmessage.NewPrinter(language.English)

// validationMessage lists what is wrong with the arguments, one "where: what" per failed
// constraint, joined with "; ".
func validationMessage(err error) string {
	ve, ok := errors.AsType[*jsonschema.ValidationError](err)
	if !ok {
		return err.Error()
	}
	var msgs []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			where := "arguments"
			if len(e.InstanceLocation) > 0 {
				where = strings.Join(e.InstanceLocation, ".")
			}
			msgs = append(msgs, where+": "+e.ErrorKind.LocalizedString(printer))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return strings.Join(msgs, "; ")
}
