package main

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// mintJWT makes what the proxy's OAUTHBEARER needs for a run: a fresh RSA
// key, its JWKS (dir/jwks.json, for --client-oauth-jwks) and, per subject,
// a token signed with it (dir/token-SUBJECT, mode 0600) carrying iss, aud,
// sub, iat and exp, as an identity provider would issue it. The private
// key is not kept.
func mintJWT(dir, issuer, audience string, subjects []string, lifetime time.Duration) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	b64 := base64.RawURLEncoding.EncodeToString
	kid := fmt.Sprintf("compat-%d", time.Now().UnixNano())
	jwks, err := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid,
		"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes()),
	}}})
	if err != nil {
		return err
	}
	header, err := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": kid})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "jwks.json"), jwks, 0o644); err != nil {
		return err
	}
	now := time.Now()
	for _, subject := range subjects {
		claims, err := json.Marshal(map[string]any{
			"iss": issuer, "aud": audience, "sub": subject, "scope": "kafka",
			"iat": now.Unix(), "exp": now.Add(lifetime).Unix(),
		})
		if err != nil {
			return err
		}
		signing := b64(header) + "." + b64(claims)
		sum := sha256.Sum256([]byte(signing))
		sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "token-"+subject), []byte(signing+"."+b64(sig)), 0o600); err != nil {
			return err
		}
	}
	return nil
}
