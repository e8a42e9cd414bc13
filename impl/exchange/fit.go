package exchange

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/billing"
	"github.com/tollgate/tollgate/impl/price"
)

// minFittedOutput is the smallest output bound a request without one is fitted to when the
// caller's credit does not cover the model's whole bound (docs/billing.md, "A request without
// an output bound is fitted to the credit"): a short answer of a coding agent's turn. Below it
// (or below the model's own bound, when that is smaller) the request is refused with a 402, as
// an answer cut off after a few hundred tokens would be paid for and of no use.
const minFittedOutput = 1024

// fitTries is how many reservations a request without an output bound makes at most: the
// model's whole bound, then a fitted bound, then once more when other requests took part of
// the credit between the two.
const fitTries = 3

// worstCase is what a request's reservation is made of, all but its output bound: its input
// (with hosted tools' results, compaction and tool prompts), the output of server-side
// compaction and of a predicted output's rejected tokens, its choices, the price and service tier it is reserved at, and its hosted tools'
// fees.
type worstCase struct {
	// prediction is the output a chat request's predicted output may add beyond its bound
	// (rejected prediction tokens, billed as output: predictionTokens), for all its choices.
	input, compaction, prediction, hostedFees int64
	choices                                   int
	price                                     price.Price
	tier                                      string
}

// at is the worst case of the request with output bound out, in micro-units.
func (w *worstCase) at(out int) int64 {
	output := billing.SaturatingAdd(billing.SaturatingAdd(int64(out)*int64(w.choices), w.compaction), w.prediction)
	return billing.SaturatingAdd(price.WorstOnTier(w.input, output, w.price, w.tier), w.hostedFees)
}

// affordable is the largest output bound, at most hi, whose worst case is within available
// micro-units; 0 when not even one token's is.
func (w *worstCase) affordable(hi int, available int64) int {
	if w.at(hi) <= available {
		return hi
	}
	lo := 0 // w.at(lo) fits, or lo is 0; w.at(hi) does not
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if w.at(mid) <= available {
			lo = mid
		} else {
			hi = mid
		}
	}
	if lo == 0 && w.at(0) > available {
		return 0
	}
	return lo
}

// inputAlone is the sentence of a refusal whose request's worst case without any output,
// held micro-units, is more than the available credit: what the input (with hosted tools'
// results and fees, when the request offers them) holds, and what is free of the account's
// credit or left of the key's cap (capped).
func (w *worstCase) inputAlone(held, available int64, capped bool) string {
	what := "input alone holds"
	if w.hostedFees > 0 {
		what = "input and hosted tools alone hold"
	}
	whose := "free"
	if capped {
		whose = "left of the key's credit cap"
	}
	return fmt.Sprintf("The request's %s up to %d micro-units (%s) before any output, more than the %d (%s) %s.",
		what, held, apierror.USD(held), available, apierror.USD(available), whose)
}

// creditLeft is what a refused reservation's error says the caller can afford: the account's
// free credit as the meter sees it, or what is left of the key's credit cap. ok is false for
// any other error (an outage, a contended account), which no fitting answers.
func creditLeft(err error) (available int64, ok bool) {
	var ie *billing.InsufficientError
	if errors.As(err, &ie) {
		return ie.AvailableMicros, true
	}
	var ke *billing.KeyCapError
	if errors.As(err, &ke) {
		return ke.AvailableMicros, true
	}
	return 0, false
}

// reserveFitted answers the refused first reservation of a request (err, a 402 or another
// failure) at outBound. A request whose client gave no output bound (asked 0) is fitted to the
// credit the refusal names: the largest bound whose worst case it covers, at least
// min(floor, outBound) (minFittedOutput over HTTP, minAgentOutput for an in-process call), is
// reserved instead and returned as fitted (the upstream is sent it, and the answer says so).
// A request whose client gave one keeps its 402, whose message now says how many output
// tokens the credit affords (boundRefusal). Any other error is returned as it is.
func (eng *Engine) reserveFitted(ctx context.Context, p auth.Principal, requestID string, w *worstCase, outBound, asked, floor int,
	field string, err error) (r *billing.Reservation, fitted int, _ error) {
	for try := 1; ; try++ {
		available, ok := creditLeft(err)
		if !ok {
			return nil, 0, err
		}
		if held := w.at(0); held > available {
			// Not one output token fits: the input (and hosted tools) alone is more than the
			// credit, which is what the refusal says rather than "0 output tokens".
			var capped *billing.KeyCapError
			return nil, 0, refuseBound(err, w.inputAlone(held, available, errors.As(err, &capped)), true)
		}
		fits := w.affordable(outBound, available)
		if asked > 0 {
			return nil, 0, refuseBound(err, fmt.Sprintf("You requested up to %d output tokens (%s), but can only afford %d.",
				outBound, field, fits), false)
		}
		if floor := min(floor, outBound); fits < floor {
			return nil, 0, refuseBound(err, fmt.Sprintf("The request gave no %s, and the credit affords only %d output tokens, fewer than the %d the gateway fits such a request to.",
				field, fits, floor), false)
		}
		if try == fitTries {
			return nil, 0, err
		}
		r, err = eng.meter.ReserveForKey(ctx, p.AccountID, requestID, w.at(fits), keyCap(p))
		if err == nil {
			return r, fits, nil
		}
		// Other requests took part of the credit meanwhile: fit to what the refusal says now.
		outBound = fits
	}
}

// boundRefusal is a 402 whose message says how many output tokens the credit affords; it
// wraps the meter's error, which callers may still match.
type boundRefusal struct {
	err error
	api *apierror.Error
}

func (e *boundRefusal) Error() string   { return e.api.Message }
func (e *boundRefusal) Unwrap() []error { return []error{e.api, e.err} }

// refuseBound is err, a refusal of the credit, with its message led by said; without its
// closing note on the worst case (apierror.WorstCaseNote, which says a lower output bound
// needs less) when noNote is set: said tells that no output bound would do.
func refuseBound(err error, said string, noNote bool) error {
	var ae *apierror.Error
	if !errors.As(err, &ae) {
		return err
	}
	c := *ae
	msg := c.Message
	if noNote {
		msg = strings.TrimSuffix(msg, " "+apierror.WorstCaseNote)
	}
	c.Message = said + " " + sentence(msg)
	return &boundRefusal{err: err, api: &c}
}

// sentence is s, a message that may begin in lower case (the meter's, written to follow a
// colon), with its first letter in upper case, to follow another sentence.
func sentence(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
