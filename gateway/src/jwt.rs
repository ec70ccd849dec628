//! Sign-in from the site that embeds a board: `session.authorize` also takes a JWT that
//! the site's identity provider signed, checked here with `jsonwebtoken` (signature,
//! issuer, audience, expiry; HS256 with a shared secret, RS256 and ES256 with the public
//! keys of a JWKS file). Its `sub` names the user (`place.user_for_subject` makes them on
//! first sight), and the claim `--jwt-name-claim` offers their name.

use crate::config::Config;
use crate::errors::{RpcError, NOT_AUTHORIZED};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{decode, decode_header, Algorithm, DecodingKey, Validation};
use serde_json::{json, Map, Value};

/// The longest JWT looked at (a provider's tokens are a few hundred bytes to a few KiB).
pub const MAX_JWT_BYTES: usize = 8 * 1024;

/// The shortest HS256 secret taken: 256 bits, as RFC 7518 asks of HS256 keys.
const MIN_SECRET_BYTES: usize = 32;

/// What a site's tokens must be, and the keys that check them.
pub struct SiteSignIn {
    issuer: String,
    audience: String,
    secret: Option<DecodingKey>,
    jwks: Option<JwkSet>,
    name_claim: String,
}

/// A checked token: who the provider says this is.
#[derive(Debug, PartialEq)]
pub struct Signed {
    pub issuer: String,
    pub subject: String,
    /// The name the token offers (`--jwt-name-claim`), if it is a string.
    pub name: Option<String>,
}

/// Whether `token` has a JWT's shape (three base64url parts), not a pgplace token's.
pub fn looks_like_jwt(token: &str) -> bool {
    token.split('.').count() == 3
}

impl SiteSignIn {
    /// The sign-in the flags ask for; None without `--jwt-issuer`. The error says which
    /// flag is missing or which file is unusable.
    pub fn from_config(config: &Config) -> Result<Option<Self>, String> {
        let Some(issuer) = config.jwt_issuer.clone().filter(|i| !i.is_empty()) else {
            if config.jwt_audience.is_some()
                || config.jwt_hs256_secret_file.is_some()
                || config.jwt_jwks_file.is_some()
            {
                return Err("--jwt-audience and the JWT keys need --jwt-issuer too".into());
            }
            return Ok(None);
        };
        let audience = config
            .jwt_audience
            .clone()
            .filter(|a| !a.is_empty())
            .ok_or("--jwt-issuer needs --jwt-audience (the `aud` the provider gives this site)")?;
        let secret = match &config.jwt_hs256_secret_file {
            Some(path) => {
                let bytes = std::fs::read(path)
                    .map_err(|e| format!("--jwt-hs256-secret-file {}: {e}", path.display()))?;
                let secret = bytes.trim_ascii_end();
                if secret.len() < MIN_SECRET_BYTES {
                    return Err(format!(
                        "--jwt-hs256-secret-file {}: the secret has {} bytes; HS256 needs at least {MIN_SECRET_BYTES}",
                        path.display(),
                        secret.len()
                    ));
                }
                Some(
                    DecodingKey::from_secret(secret)
                        .map_err(|e| format!("--jwt-hs256-secret-file {}: {e}", path.display()))?,
                )
            }
            None => None,
        };
        let jwks = match &config.jwt_jwks_file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("--jwt-jwks-file {}: {e}", path.display()))?;
                let set: JwkSet = serde_json::from_str(&text)
                    .map_err(|e| format!("--jwt-jwks-file {}: not a JWKS ({e})", path.display()))?;
                if set.keys.is_empty() {
                    return Err(format!(
                        "--jwt-jwks-file {}: it has no keys",
                        path.display()
                    ));
                }
                for key in &set.keys {
                    DecodingKey::from_jwk(key).map_err(|e| {
                        format!(
                            "--jwt-jwks-file {}: key {:?}: {e}",
                            path.display(),
                            key.common.key_id
                        )
                    })?;
                }
                Some(set)
            }
            None => None,
        };
        if secret.is_none() && jwks.is_none() {
            return Err(
                "--jwt-issuer needs a key: --jwt-hs256-secret-file or --jwt-jwks-file".into(),
            );
        }
        Ok(Some(SiteSignIn {
            issuer,
            audience,
            secret,
            jwks,
            name_claim: config.jwt_name_claim.clone(),
        }))
    }

    /// Checks a token: its signature by a configured key, its issuer, audience and expiry
    /// (a minute's leeway for clocks), and that it names a subject. Refused: −32002 with
    /// `data.reason`.
    pub fn check(&self, token: &str) -> Result<Signed, RpcError> {
        if token.len() > MAX_JWT_BYTES {
            return Err(refused(
                "malformed",
                format!("longer than {MAX_JWT_BYTES} bytes"),
            ));
        }
        let header = decode_header(token).map_err(|e| refusal(e.kind()))?;
        let key = self.key(header.alg, header.kid.as_deref())?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let claims = decode::<Map<String, Value>>(token, &key, &validation)
            .map_err(|e| refusal(e.kind()))?
            .claims;
        let subject = match claims.get("sub") {
            Some(Value::String(sub)) if !sub.is_empty() => sub.clone(),
            _ => return Err(refused("subject", "its `sub` is empty".into())),
        };
        let name = claims
            .get(&self.name_claim)
            .and_then(Value::as_str)
            .map(str::to_string);
        Ok(Signed {
            issuer: self.issuer.clone(),
            subject,
            name,
        })
    }

    /// The key for a token signed with `alg` (and the JWKS key `kid`, or the only one).
    fn key(&self, alg: Algorithm, kid: Option<&str>) -> Result<DecodingKey, RpcError> {
        match alg {
            Algorithm::HS256 => self
                .secret
                .clone()
                .ok_or_else(|| refused("algorithm", "this gateway takes no HS256 tokens".into())),
            Algorithm::RS256 | Algorithm::ES256 => {
                let jwks = self.jwks.as_ref().ok_or_else(|| {
                    refused("algorithm", format!("this gateway takes no {alg:?} tokens"))
                })?;
                let jwk = match kid {
                    Some(kid) => jwks.find(kid),
                    None if jwks.keys.len() == 1 => jwks.keys.first(),
                    None => None,
                }
                .ok_or_else(|| refused("key", format!("no key {kid:?} in the JWKS")))?;
                DecodingKey::from_jwk(jwk).map_err(|e| refused("key", e.to_string()))
            }
            other => Err(refused(
                "algorithm",
                format!("{other:?} is not taken (HS256, RS256, ES256)"),
            )),
        }
    }
}

/// −32002: the token was not taken, and why (`data.reason`: a word a client can act on).
fn refused(reason: &str, why: String) -> RpcError {
    RpcError::new(
        NOT_AUTHORIZED,
        format!("the sign-in token is not taken: {why}"),
    )
    .with_data(json!({"reason": reason}))
}

fn refusal(kind: &ErrorKind) -> RpcError {
    match kind {
        ErrorKind::ExpiredSignature => refused("expired", "it has expired".into()),
        ErrorKind::ImmatureSignature => refused("not_yet_valid", "it is not valid yet".into()),
        ErrorKind::InvalidIssuer => refused("issuer", "another issuer made it".into()),
        ErrorKind::InvalidAudience => refused("audience", "it is for another audience".into()),
        ErrorKind::InvalidSignature => refused("signature", "its signature does not match".into()),
        ErrorKind::InvalidAlgorithm => {
            refused("algorithm", "its algorithm does not match the key".into())
        }
        ErrorKind::MissingRequiredClaim(claim) | ErrorKind::InvalidClaimFormat(claim) => refused(
            "claims",
            format!("its `{claim}` claim is missing or not as it must be"),
        ),
        other => refused("malformed", format!("{other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{encode, get_current_timestamp, EncodingKey, Header};

    const SECRET: &[u8] = b"a shared secret of at least thirty-two bytes";

    fn sign_in() -> SiteSignIn {
        SiteSignIn {
            issuer: "https://id.example".into(),
            audience: "pgplace".into(),
            secret: Some(DecodingKey::from_secret(SECRET).unwrap()),
            jwks: None,
            name_claim: "name".into(),
        }
    }

    fn token(claims: Value, secret: &[u8]) -> String {
        encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(secret).unwrap(),
        )
        .unwrap()
    }

    fn claims(change: impl FnOnce(&mut Map<String, Value>)) -> Value {
        let mut claims = json!({"iss": "https://id.example", "aud": "pgplace", "sub": "u-1",
                                "name": "Ada", "exp": get_current_timestamp() + 600})
        .as_object()
        .unwrap()
        .clone();
        change(&mut claims);
        Value::Object(claims)
    }

    fn reason(result: Result<Signed, RpcError>) -> String {
        let error = result.unwrap_err();
        assert_eq!(error.code, NOT_AUTHORIZED, "{error:?}");
        error.data.unwrap()["reason"].as_str().unwrap().to_string()
    }

    #[test]
    fn a_good_token_names_its_subject_and_offers_a_name() {
        let signed = sign_in().check(&token(claims(|_| {}), SECRET)).unwrap();
        assert_eq!(
            signed,
            Signed {
                issuer: "https://id.example".into(),
                subject: "u-1".into(),
                name: Some("Ada".into())
            }
        );
    }

    #[test]
    fn each_fault_is_refused_with_its_reason() {
        let s = sign_in();
        let past = get_current_timestamp() - 3600;
        let cases: Vec<(&str, String)> = vec![
            (
                "expired",
                token(
                    claims(|c| {
                        c.insert("exp".into(), past.into());
                    }),
                    SECRET,
                ),
            ),
            (
                "issuer",
                token(
                    claims(|c| {
                        c.insert("iss".into(), "https://evil.example".into());
                    }),
                    SECRET,
                ),
            ),
            (
                "audience",
                token(
                    claims(|c| {
                        c.insert("aud".into(), "another-site".into());
                    }),
                    SECRET,
                ),
            ),
            (
                "signature",
                token(
                    claims(|_| {}),
                    b"another secret of at least thirty-two bytes!",
                ),
            ),
            (
                "claims",
                token(
                    claims(|c| {
                        c.remove("sub");
                    }),
                    SECRET,
                ),
            ),
            (
                "claims",
                token(
                    claims(|c| {
                        c.remove("exp");
                    }),
                    SECRET,
                ),
            ),
            (
                "claims",
                token(
                    claims(|c| {
                        c.insert("sub".into(), 7.into());
                    }),
                    SECRET,
                ),
            ),
            (
                "subject",
                token(
                    claims(|c| {
                        c.insert("sub".into(), "".into());
                    }),
                    SECRET,
                ),
            ),
            ("malformed", "a.b.c".into()),
            ("malformed", format!("{}.x.y", "a".repeat(MAX_JWT_BYTES))),
        ];
        for (expected, token) in cases {
            assert_eq!(reason(s.check(&token)), expected, "{token}");
        }
        // An algorithm without a key here: RS256 with no JWKS.
        let header = Header::new(Algorithm::RS256);
        let forged = format!(
            "{}.{}.sig",
            base64::Engine::encode(
                &base64::engine::general_purpose::URL_SAFE_NO_PAD,
                serde_json::to_vec(&header).unwrap()
            ),
            base64::Engine::encode(
                &base64::engine::general_purpose::URL_SAFE_NO_PAD,
                claims(|_| {}).to_string()
            )
        );
        assert_eq!(reason(s.check(&forged)), "algorithm");
    }

    #[test]
    fn tokens_and_pgplace_tokens_are_told_apart() {
        assert!(looks_like_jwt(&token(claims(|_| {}), SECRET)));
        assert!(!looks_like_jwt(&"ab".repeat(32)));
    }
}
