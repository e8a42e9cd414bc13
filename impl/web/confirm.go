package web

import (
	"net/http"
	"strings"
)

// Destructive actions are confirmed on the server, so that the confirmation holds without
// JavaScript and under the pages' Content-Security-Policy (docs/web.md, "Confirming what
// stops working"). The action's form posts without the confirmation field; the answer is a
// page (templates/confirm.html) that says what will stop working, with the same form and the
// field set, and a way back. Only a request carrying confirmField=confirmYes acts; every
// other one changes nothing. An action whose consequences are wide (revoking every key)
// also asks for a word to be typed (confirmation.TypeToConfirm).

// The confirmation field and the value that confirms.
const (
	confirmField = "confirm"
	confirmYes   = "yes"
	// typedField holds the word a person types for an action that asks for one.
	typedField = "confirm_text"
)

// confirmation is a confirmation page: what the action stops, and the form that does it.
type confirmation struct {
	// Title is the page's heading ("Revoke key ci?").
	Title string
	// Consequences are the paragraphs that say what stops working, the first the sentence
	// that names it.
	Consequences []string
	// Items lists what is affected, when there are several (the keys of "revoke all").
	Items []string
	// Action is the form's URL; Button the submit button's text, which names the action and
	// its object ("Revoke key ci").
	Action, Button string
	// TypeToConfirm, when set, is the word the person must type to confirm; Error says what
	// was typed wrong.
	TypeToConfirm, Error string
	// Back is where "Cancel" leads.
	Back string
}

// confirmed reports whether the request confirms the action (its form carried
// confirmField=confirmYes, and the typed word when c asks for one); when it does not, it has
// answered with the confirmation page (422 when a typed word was wrong, else 200). The
// confirmation's form carries the account it was shown in, as every form of an account's page
// does (postedInShownAccount, which member checks before the handler runs): an action is named
// by what the page shows (a dataset by its name, which another account may use too), so one
// asked for or confirmed on a page of one account and sent after the visitor switched to
// another is refused (409) and changes nothing there.
func (a *App) confirmed(w http.ResponseWriter, r *http.Request, v *Visitor, c confirmation) bool {
	_ = r.ParseForm()
	if r.PostFormValue(confirmField) == confirmYes {
		if c.TypeToConfirm == "" || strings.TrimSpace(r.PostFormValue(typedField)) == c.TypeToConfirm {
			return true
		}
		c.Error = "Type " + c.TypeToConfirm + " exactly to confirm. Nothing was changed."
		a.render(w, r, v, http.StatusUnprocessableEntity, "confirm", c.Title, c)
		return false
	}
	a.render(w, r, v, http.StatusOK, "confirm", c.Title, c)
	return false
}
