package convert

import (
	"errors"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
)

// maxAudioDepth is how deep AudioRefusal looks for an audio part below messages or input: a
// chat input_audio part is at depth 3 (messages[i].content[j]), a part of a Responses
// function_call_output's output at depth 3 too.
const maxAudioDepth = 8

// errFound ends a walk of AudioRefusal's at the first audio it finds.
var errFound = errors.New("convert: audio found")

// AudioRefusal is the 400 for a request of format f (its view v) that carries audio or asks for
// it, naming the field; nil for a request that does neither. The meter prices uncached input,
// cache reads and writes and output, not audio, which providers bill at rates of their own
// (gpt-4o-audio-preview: $40 and $80 per million audio tokens against $2.50 and $10 for text),
// so audio is refused on every route, before any reservation or upstream call, whatever the
// upstream's format. What carries audio:
//
//	chat       modalities naming "audio" and a non-null audio (spoken output); an input_audio
//	           content part; a non-null audio on a message (a reference to an earlier spoken
//	           answer, which the provider bills again as audio input)
//	Responses  an input_audio content part anywhere in input
//	Messages   nothing: the format has no audio
//
// A request without audio costs, in chat, the look-up of modalities among the top-level members;
// the rest is read only when the validator's pass met a member named audio or input_audio
// (jsonview.View.MayHoldAudio), so such a request pays no second scan of its body.
func AudioRefusal(f llm.Format, v *jsonview.View) error {
	switch f {
	case llm.FormatChat:
		if value, ok := v.Value("modalities"); ok && asksForAudio(value) {
			return audioRefused("modalities", "'modalities' asks for audio output")
		}
		if !v.MayHoldAudio() {
			return nil
		}
		if value, ok := v.Value("audio"); ok && !isNull(value) {
			return audioRefused("audio", "'audio' asks for audio output")
		}
		if value, ok := v.Value("messages"); ok {
			return audioIn(value, "messages", true)
		}
	case llm.FormatResponses:
		if !v.MayHoldAudio() {
			return nil
		}
		if value, ok := v.Value("input"); ok {
			return audioIn(value, "input", false)
		}
	}
	return nil
}

// asksForAudio reports whether a chat modalities value is an array naming "audio".
func asksForAudio(value []byte) bool {
	items, _ := scanArray(value)
	for _, item := range items {
		if s, ok := stringValue(item); ok && s == "audio" {
			return true
		}
	}
	return false
}

// audioIn is the 400 for the first audio in value (a request's messages or input, at path):
// an object of type input_audio or with an input_audio member (a content part), or, in chat,
// an object with a non-null audio member (a message's reference to a spoken answer). Nil when
// there is none.
func audioIn(value []byte, path string, chat bool) error {
	where, isRef := "", false
	var walk func(value []byte, path string, depth int) error
	walk = func(value []byte, path string, depth int) error {
		if depth > maxAudioDepth {
			return nil
		}
		switch firstByte(value) {
		case '[':
			items, _ := scanArray(value)
			for i, item := range items {
				if err := walk(item, idx(path, i), depth+1); err != nil {
					return err
				}
			}
		case '{':
			return eachMember(value, func(key, member []byte) error {
				switch {
				case string(key) == "input_audio":
					where = path
					return errFound
				case string(key) == "type":
					if s, _ := stringValue(member); s == "input_audio" {
						where = path
						return errFound
					}
				case chat && string(key) == "audio" && !isNull(member):
					where, isRef = path+".audio", true
					return errFound
				case firstByte(member) == '{' || firstByte(member) == '[':
					return walk(member, path+"."+string(key), depth+1)
				}
				return nil
			})
		}
		return nil
	}
	if walk(value, path, 0) == nil {
		return nil
	}
	if isRef {
		return audioRefused(where, "'"+where+"' refers to an earlier audio answer, which the provider bills again as audio input")
	}
	return audioRefused(where, "'"+where+"' is an audio input (input_audio)")
}

// audioRefused is the 400 naming param for audio: what says what the field asks for.
func audioRefused(param, what string) error {
	return apierror.Invalid(param, "%s, and audio is not metered by this gateway: the provider bills audio tokens at rates of their own, which tollgate neither reserves nor charges, so it serves text and images only. Send the request without audio.", what)
}
