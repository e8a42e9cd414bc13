package convert_test

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/convert"
	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
)

// TestNormalizeMediaTypes: the media_type of a Messages image or document source, in a message
// or a tool result, is sent to the upstream in lower case and without parameters (Anthropic
// refuses "image/PNG" with a 400), every other byte as the client sent it; a tool call's input
// and a text that say media_type are not touched, and a request whose media types are lower
// case already is left as it is, with no edit.
func TestNormalizeMediaTypes(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"an image's", `{"model":"m","messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/PNG","data":"iVBO"}}]}]}`,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}}]}]}`},
		{"a document's, with a parameter", `{"messages": [ {"role":"user","content":[ {"type":"text","text":"Read it."}, {"source": {"media_type" : "Application/PDF; name=a.pdf", "type":"base64","data":"JVBE"}, "type":"document"} ]} ], "max_tokens":5}`,
			`{"messages": [ {"role":"user","content":[ {"type":"text","text":"Read it."}, {"source": {"media_type" : "application/pdf", "type":"base64","data":"JVBE"}, "type":"document"} ]} ], "max_tokens":5}`},
		{"in a tool result, a tool call's input untouched", `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"shot","input":{"type":"image","source":{"media_type":"Image/JPEG"}}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"image","source":{"type":"base64","media_type":"Image/JPEG","data":"/9j/"}}]}]}]}`,
			`{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"shot","input":{"type":"image","source":{"media_type":"Image/JPEG"}}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j/"}}]}]}]}`},
		{"a key spelled with an escape", `{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media\u005ftype":"image/GIF","data":"R0lG"}}]}]}`,
			`{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media\u005ftype":"image/gif","data":"R0lG"}}]}]}`},
		{"a value spelled with an escape", `{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/\u0050NG","data":"iVBO"}}]}]}`,
			`{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}}]}]}`},
		{"lower case already", `{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}},{"type":"text","text":"\"media_type\": \"image/PNG\""}]}]}`, ""},
		{"only a tool call's input", `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{"media_type":"Image/PNG"}}]}]}`, ""},
		{"a string content", `{"messages":[{"role":"user","content":"media_type: image/PNG"}]}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := jsonview.Parse([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			var edits jsonview.Edits
			changed := convert.NormalizeMediaTypes(v, &edits)
			if tc.want == "" {
				if changed || !edits.Empty() {
					t.Errorf("changed %v with %s", changed, edits.AppendTo(nil, v))
				}
				return
			}
			if got := string(edits.AppendTo(nil, v)); !changed || got != tc.want {
				t.Errorf("changed %v:\n got %s\nwant %s", changed, got, tc.want)
			}
		})
	}
}

// TestMessagesSourceMediaTypeIsNormal: a Messages source's media type is read in its normal
// form, as a data: URL's is, so that a request translated to another format, or to Messages
// again, carries "image/png" for "image/PNG".
func TestMessagesSourceMediaTypeIsNormal(t *testing.T) {
	body := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/PNG","data":"iVBO"}},{"type":"document","source":{"type":"base64","media_type":"Application/PDF;name=a.pdf","data":"JVBE"}}]}]}`
	req, err := convert.DecodeRequest(llm.FormatMessages, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range req.Messages[0].Parts {
		got = append(got, p.MediaType)
	}
	if strings.Join(got, " ") != "image/png application/pdf" {
		t.Errorf("media types %q; want image/png and application/pdf", got)
	}
}

// TestNormalizeMediaTypesAllocatesNothing: a relayed Messages request whose media types are
// lower case pays a look-up and no allocation.
func TestNormalizeMediaTypesAllocatesNothing(t *testing.T) {
	v, err := jsonview.Parse([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}},{"type":"text","text":"What is it?"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		var edits jsonview.Edits
		if convert.NormalizeMediaTypes(v, &edits) {
			t.Fatal("changed")
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations", allocs)
	}
}
