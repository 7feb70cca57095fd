package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// Scopes of a repository's token, as distribution's token spec names
// them.
func pullScope(repo string) string { return "repository:" + repo + ":pull" }
func pushScope(repo string) string { return "repository:" + repo + ":pull,push" }

// authClient signs requests to one registry in: on a 401 it reads the
// challenge (WWW-Authenticate), Basic or Bearer, looks up Docker's
// credentials for the registry once, and sends the request again with a
// password or a token from the challenge's realm; the scheme and the
// tokens it got are kept for the next requests. Requests to another host
// go out unsigned.
type authClient struct {
	hc    *http.Client
	host  string   // the registry as the reference names it: credentials' key
	to    string   // the host requests go to
	plain []string // the hosts spoken to over plain http (Client.PlainHTTP)

	mu      sync.Mutex
	looked  bool
	cred    credential
	credErr error
	basic   bool              // the registry asked for Basic
	tokens  map[string]string // Bearer tokens by scope
}

func (a *authClient) credential(ctx context.Context) (credential, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.looked {
		a.cred, a.credErr = dockerCredential(ctx, a.host)
		a.looked = true
	}
	return a.cred, a.credErr
}

// do sends req (its body, if any, rewindable by GetBody) signed in for
// scope and returns the answer, which the caller closes, and whether the
// request it answers carried the user's credentials.
func (a *authClient) do(req *http.Request, scope string) (*http.Response, bool, error) {
	req.Header.Set("User-Agent", "guard")
	if req.URL.Host != a.to {
		resp, err := a.hc.Do(req)
		return resp, false, err
	}
	ctx := req.Context()
	a.mu.Lock()
	basic, token := a.basic, a.tokens[scope]
	a.mu.Unlock()
	sent := false
	if basic {
		if c, err := a.credential(ctx); err == nil && c.Username != "" {
			req.SetBasicAuth(c.Username, c.Password)
			sent = true
		}
	} else if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
		sent = true
	}
	resp, err := a.hc.Do(req)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, sent, err
	}
	scheme, params := parseChallenge(resp.Header.Get("WWW-Authenticate"))
	if scheme == "" || (sent && scheme == "basic") {
		return resp, sent, nil
	}
	c, err := a.credential(ctx)
	if err != nil {
		resp.Body.Close()
		return nil, false, err
	}
	var tok string
	switch scheme {
	case "basic":
		if c.Username == "" {
			return resp, false, nil
		}
		a.mu.Lock()
		a.basic = true
		a.mu.Unlock()
	case "bearer":
		scopes := strings.Fields(params["scope"])
		if !slices.Contains(scopes, scope) {
			scopes = append(scopes, scope)
		}
		var tokSent bool
		tok, tokSent, err = a.fetchToken(ctx, c, params["realm"], params["service"], scopes)
		if err != nil {
			// The token service's refusal (an *Error) is the registry's.
			resp.Body.Close()
			return nil, tokSent, err
		}
		a.mu.Lock()
		if a.tokens == nil {
			a.tokens = map[string]string{}
		}
		a.tokens[scope] = tok
		a.mu.Unlock()
		sent = tokSent
	default:
		return resp, false, nil
	}
	drain(resp)
	again, err := retry(req)
	if err != nil {
		return nil, false, err
	}
	if scheme == "basic" {
		again.SetBasicAuth(c.Username, c.Password)
		sent = true
	} else {
		again.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err = a.hc.Do(again)
	return resp, sent, err
}

// retry is req to send again, its body rewound.
func retry(req *http.Request) (*http.Request, error) {
	again := req.Clone(req.Context())
	if req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return nil, errors.New("cannot send the request's body again after the sign-in")
		}
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		again.Body = body
	}
	return again, nil
}

// fetchToken gets a Bearer token for scopes from realm: with an identity
// token by OAuth2's refresh grant, with a password by a GET signed in with
// it (distribution's token spec), anonymously without either; a registry
// token from Docker's config is used as is. It reports whether the user's
// credentials went with the request.
func (a *authClient) fetchToken(ctx context.Context, c credential, realm, service string, scopes []string) (string, bool, error) {
	if c.AccessToken != "" {
		return c.AccessToken, true, nil
	}
	u, err := url.Parse(realm)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", false, fmt.Errorf("%s: its token service %.200q is not an http(s) address", a.host, realm)
	}
	if u.Scheme == "http" && !slices.Contains(a.plain, u.Host) {
		// Credentials never go over plain http but to a host the
		// manifest marks as one.
		return "", false, fmt.Errorf("%s: refused to sign in at the plain http token service %s (not in [registry] plain_http)", a.host, u.Redacted())
	}
	var req *http.Request
	sent := false
	if c.RefreshToken != "" {
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {c.RefreshToken}, "client_id": {"guard"}, "scope": {strings.Join(scopes, " ")}}
		if service != "" {
			form.Set("service", service)
		}
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader(form.Encode()))
		if err != nil {
			return "", false, err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		sent = true
	} else {
		q := u.Query()
		if service != "" {
			q.Set("service", service)
		}
		for _, s := range scopes {
			q.Add("scope", s)
		}
		u.RawQuery = q.Encode()
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return "", false, err
		}
		if c.Username != "" {
			req.SetBasicAuth(c.Username, c.Password)
			sent = true
		}
	}
	req.Header.Set("User-Agent", "guard")
	resp, err := a.hc.Do(req)
	if err != nil {
		return "", false, err
	}
	if resp.StatusCode != http.StatusOK {
		e := errorOf(resp, sent, a.host, "")
		return "", sent, e
	}
	defer resp.Body.Close()
	var body struct {
		Token       string `json:"token"`
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil {
		return "", sent, fmt.Errorf("%s: its token service's answer is not JSON: %w", a.host, err)
	}
	if body.AccessToken != "" {
		return body.AccessToken, sent, nil
	}
	if body.Token == "" {
		return "", sent, fmt.Errorf("%s: its token service sent no token", a.host)
	}
	return body.Token, sent, nil
}

// parseChallenge reads a WWW-Authenticate header: its scheme in lower
// case and its parameters (key=value or key="quoted value", comma
// separated).
func parseChallenge(h string) (string, map[string]string) {
	h = strings.TrimSpace(h)
	scheme, rest, _ := strings.Cut(h, " ")
	scheme = strings.ToLower(scheme)
	params := map[string]string{}
	for {
		rest = strings.TrimLeft(rest, " ,")
		if rest == "" {
			return scheme, params
		}
		key, after, ok := strings.Cut(rest, "=")
		if !ok {
			return scheme, params
		}
		key = strings.ToLower(strings.TrimSpace(key))
		var val string
		if strings.HasPrefix(after, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(after) && after[i] != '"'; i++ {
				if after[i] == '\\' && i+1 < len(after) {
					i++
				}
				b.WriteByte(after[i])
			}
			val, rest = b.String(), after[min(i+1, len(after)):]
		} else {
			val, rest, _ = strings.Cut(after, ",")
			val = strings.TrimSpace(val)
		}
		params[key] = val
	}
}

// drain reads a little of an answer not used, so its connection is
// reused, and closes it.
func drain(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}
