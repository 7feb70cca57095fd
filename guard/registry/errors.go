package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// The kinds of refusal a caller acts on. An *Error answers errors.Is for
// the one its status and code make; the hint a person reads is added in
// one place, Error.Error.
var (
	// ErrNotFound: the registry has no such tag, digest or blob.
	ErrNotFound = errors.New("not found")
	// ErrNothingPushed: the repository itself is unknown to the registry
	// (distribution's NAME_UNKNOWN, or a 404 on its tag list): nothing
	// was ever pushed to it.
	ErrNothingPushed = errors.New("nothing pushed yet")
	// ErrSignIn: the registry asks for a sign-in and none was found.
	ErrSignIn = errors.New("sign-in needed")
	// ErrCredentialsRefused: credentials were sent and the registry (or
	// its token service) refused them.
	ErrCredentialsRefused = errors.New("the credentials were refused")
	// ErrDenied: signed in, and the account may not do this.
	ErrDenied = errors.New("denied")
)

// Error is a registry's refusal of one request.
type Error struct {
	Method, URL string
	Status      int
	// Code and Message are the first of distribution's error body
	// ({"errors":[{"code":…,"message":…}]}), when it sent one.
	Code, Message string
	// Host is the registry, as the reference names it.
	Host string
	// SentCredentials says the refused request carried credentials of
	// the user's (a password, an identity token, or a token got with
	// them).
	SentCredentials bool
	// Repo is the repository the request was for.
	Repo string
	// tagList marks the tag list, whose 404 means nothing was pushed.
	tagList bool
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s %s: %d %s", e.Method, e.URL, e.Status, strings.ToLower(http.StatusText(e.Status)))
	if e.Code != "" {
		msg += ": " + strings.ToLower(strings.ReplaceAll(e.Code, "_", " "))
		if e.Message != "" {
			msg += ": " + e.Message
		}
	}
	switch {
	case errors.Is(e, ErrCredentialsRefused):
		msg += fmt.Sprintf(" (the credentials were refused by %s: sign in again with docker login %s, or oras login)", e.Host, e.Host)
	case errors.Is(e, ErrSignIn):
		msg += fmt.Sprintf(" (%s asks for a sign-in: docker login %s, or oras login)", e.Host, e.Host)
	case errors.Is(e, ErrDenied):
		msg += fmt.Sprintf(" (the account signed in to %s may not do this on %s)", e.Host, e.Repo)
	}
	return msg
}

// Is maps a status and distribution's code to the kinds above.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrNothingPushed:
		return e.Status == http.StatusNotFound && (e.Code == "NAME_UNKNOWN" || e.tagList)
	case ErrSignIn:
		return !e.SentCredentials && (e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden)
	case ErrCredentialsRefused:
		return e.SentCredentials && e.Status == http.StatusUnauthorized
	case ErrDenied:
		return e.SentCredentials && e.Status == http.StatusForbidden
	}
	return false
}

// errorOf reads a refusal's body (bounded) into an *Error and closes it.
func errorOf(resp *http.Response, sent bool, host, repo string) *Error {
	defer resp.Body.Close()
	e := &Error{Method: resp.Request.Method, URL: resp.Request.URL.Redacted(), Status: resp.StatusCode, Host: host, Repo: repo, SentCredentials: sent}
	var body struct {
		Errors []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(data, &body) == nil && len(body.Errors) > 0 {
		e.Code, e.Message = body.Errors[0].Code, body.Errors[0].Message
	}
	return e
}
