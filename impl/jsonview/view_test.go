package jsonview

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// decode is encoding/json's reading of an object: the reference the views and edits are
// checked against.
func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not a JSON object: %s: %v", b, err)
	}
	return m
}

func TestParseAgreesWithEncodingJSON(t *testing.T) {
	for _, body := range []string{
		`{}`,
		` { } `,
		`{"model":"m","messages":[{"role":"user","content":"hi \"there\" {["}],"stream":true,"n":null}`,
		`{"a":1,"a":2}`,
		"{\n  \"k\\u00e9y\" : -1.5e3 ,\"t\":false}\n",
		`{"nested":{"model":"inner"},"model":"outer"}`,
	} {
		v, err := Parse([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		got := map[string]any{}
		for _, m := range v.Members() {
			var val any
			if err := json.Unmarshal(v.ValueOf(m), &val); err != nil {
				t.Fatalf("%s: member %s: %v", body, m.Key, err)
			}
			got[string(m.Key)] = val
		}
		if want := decode(t, []byte(body)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: members %v, want %v", body, got, want)
		}
	}
	for _, bad := range []string{``, `[]`, `{"a":1`, `{"a" 1}`, `{"a":1,}`, `{"a":tru}`, `{"a":[1,2}`, `{"a":1} x`, `"s"`, `{"a":01x}`} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestLookupTakesTheLastOfARepeatedKey(t *testing.T) {
	v, err := Parse([]byte(`{"model":"a","x":1,"model":"b"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := v.Value("model"); string(got) != `"b"` {
		t.Errorf("model %s", got)
	}
	if v.Has("y") || !v.Has("x") {
		t.Error("Has")
	}
}

func TestManyMembers(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 40 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"k%d":%d`, i, i)
	}
	b.WriteString("}")
	v, err := Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Members()) != 40 {
		t.Fatalf("%d members", len(v.Members()))
	}
	if got, _ := v.Value("k39"); string(got) != "39" {
		t.Errorf("k39 = %s", got)
	}
	if got, _ := v.Value("k3"); string(got) != "3" {
		t.Errorf("k3 = %s", got)
	}
}

// edit is one edit of a differential case: replace, remove or add a member.
type edit struct {
	op, key, value string
}

// apply makes the edits with Edits and with encoding/json's map, and compares the two.
func apply(t *testing.T, body string, edits ...edit) string {
	t.Helper()
	v, err := Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := decode(t, []byte(body))
	var e Edits
	for _, ed := range edits {
		switch ed.op {
		case "replace":
			for _, m := range v.Members() {
				if string(m.Key) == ed.key {
					e.Replace(m, []byte(ed.value))
				}
			}
			want[ed.key] = decode(t, []byte(`{"v":`+ed.value+`}`))["v"]
		case "remove":
			for _, m := range v.Members() {
				if string(m.Key) == ed.key {
					e.Remove(m)
				}
			}
			delete(want, ed.key)
		case "add":
			e.Add(ed.key, []byte(ed.value))
			want[ed.key] = decode(t, []byte(`{"v":`+ed.value+`}`))["v"]
		case "set":
			e.Set(v, ed.key, []byte(ed.value))
			want[ed.key] = decode(t, []byte(`{"v":`+ed.value+`}`))["v"]
		}
	}
	out := e.AppendTo([]byte("prefix:"), v)
	if !strings.HasPrefix(string(out), "prefix:") {
		t.Fatalf("the prefix was overwritten: %s", out)
	}
	out = out[len("prefix:"):]
	if got := decode(t, out); !reflect.DeepEqual(got, want) {
		t.Errorf("%s with %v:\n got %s\nwant %v", body, edits, out, want)
	}
	return string(out)
}

func TestEditsAgreeWithEncodingJSON(t *testing.T) {
	const body = `{"a":1, "b":{"x":[1,2]},  "c":"three","d":null}`
	keys := []string{"a", "b", "c", "d"}
	// Every subset of members removed, with a replacement of each kept member and an add.
	for mask := range 1 << len(keys) {
		var edits []edit
		for i, k := range keys {
			if mask&(1<<i) != 0 {
				edits = append(edits, edit{"remove", k, ""})
			}
		}
		apply(t, body, edits...)
		for i, k := range keys {
			if mask&(1<<i) == 0 {
				apply(t, body, append(slices.Clone(edits), edit{"replace", k, `{"new":true}`}, edit{"add", "z", "9"})...)
			}
		}
	}
	apply(t, `{}`, edit{"add", "model", `"m"`}, edit{"add", "store", "false"})
	apply(t, `{ }`, edit{"set", "model", `"m"`})
	apply(t, `{"model":"a","model":"b"}`, edit{"replace", "model", `"up"`})
	apply(t, `{"x":1}`, edit{"remove", "x", ""}, edit{"add", "y", "2"})
	apply(t, "{\n\t\"x\" : 1 ,\n\t\"y\" : 2\n}", edit{"remove", "y", ""})
	apply(t, "{\n\t\"x\" : 1 ,\n\t\"y\" : 2\n}", edit{"remove", "x", ""})
}

// TestEditsKeepTheClientsBytes: only the edited values change; every other byte (white space,
// key order, escapes, number spellings) is copied as it came.
func TestEditsKeepTheClientsBytes(t *testing.T) {
	body := "{ \"model\" : \"a\",\n \"x\": 1.50e1, \"s\":\"\\u00e9\\n\" }"
	got := apply(t, body, edit{"replace", "model", `"up"`})
	if want := strings.Replace(body, `"a"`, `"up"`, 1); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	got = apply(t, body, edit{"add", "store", "false"})
	if want := "{\"store\":false, \"model\" : \"a\",\n \"x\": 1.50e1, \"s\":\"\\u00e9\\n\" }"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestManyEdits: more edits and adds than the inline buffers hold.
func TestManyEdits(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	var edits []edit
	for i := range 30 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"k%d":%d`, i, i)
		switch i % 3 {
		case 0:
			edits = append(edits, edit{"replace", fmt.Sprintf("k%d", i), `"r"`})
		case 1:
			edits = append(edits, edit{"remove", fmt.Sprintf("k%d", i), ""})
		}
	}
	b.WriteString("}")
	for i := range 6 {
		edits = append(edits, edit{"add", fmt.Sprintf("new%d", i), "true"})
	}
	apply(t, b.String(), edits...)
}

// TestParseAndEditOnTheStack: a View and Edits used as local values allocate nothing beyond
// the output: the answers and stream events of every request go through them.
func TestParseAndEditOnTheStack(t *testing.T) {
	body := []byte(`{"id":"x","object":"chat.completion.chunk","model":"upstream","choices":[{"delta":{"content":"hi"}}]}`)
	quoted := []byte(`"service-flint"`)
	dst := make([]byte, 0, 256)
	allocs := testing.AllocsPerRun(100, func() {
		var v View
		if err := v.Parse(body); err != nil {
			t.Fatal(err)
		}
		var e Edits
		m, _ := v.Lookup("model")
		e.Replace(m, quoted)
		dst = e.AppendTo(dst[:0], &v)
	})
	if allocs != 0 {
		t.Errorf("%v allocations", allocs)
	}
	if want := strings.Replace(string(body), `"upstream"`, `"service-flint"`, 1); string(dst) != want {
		t.Errorf("got %s", dst)
	}
}

func FuzzEdits(f *testing.F) {
	f.Add(`{"a":1,"b":[2],"c":{"d":3}}`, uint8(5), uint8(2))
	f.Add(`{"model":"x"}`, uint8(1), uint8(0))
	f.Fuzz(func(t *testing.T, body string, removeMask, replaceMask uint8) {
		if !json.Valid([]byte(body)) || !utf8.ValidString(body) {
			return // encoding/json replaces invalid UTF-8 in keys, the view keeps the bytes
		}
		v, err := Parse([]byte(body))
		if err != nil {
			return
		}
		var want map[string]any
		if json.Unmarshal([]byte(body), &want) != nil {
			return
		}
		// encoding/json keeps the last of a repeated key; the edits below act on every member
		// of a key, so a key's fate is its last member's.
		var e Edits
		fate := map[string]string{}
		for i, m := range v.Members() {
			switch {
			case removeMask&(1<<(i%8)) != 0:
				fate[string(m.Key)] = "remove"
			case replaceMask&(1<<(i%8)) != 0:
				fate[string(m.Key)] = "replace"
			default:
				fate[string(m.Key)] = ""
			}
		}
		for _, m := range v.Members() {
			switch fate[string(m.Key)] {
			case "remove":
				e.Remove(m)
			case "replace":
				e.Replace(m, []byte(`"R"`))
			}
		}
		for k, f := range fate {
			switch f {
			case "remove":
				delete(want, k)
			case "replace":
				want[k] = "R"
			}
		}
		out := e.AppendTo(nil, v)
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s → %s: %v", body, out, err)
		}
		if !maps.EqualFunc(got, want, func(a, b any) bool { return reflect.DeepEqual(a, b) }) {
			t.Fatalf("%s → %s, want %v", body, out, want)
		}
	})
}
