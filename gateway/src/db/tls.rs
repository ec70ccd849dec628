//! TLS to PostgreSQL, asked for as libpq asks for it: `sslmode` and `sslrootcert` in the
//! database URL (either form: `postgresql://…?sslmode=…&sslrootcert=…` or
//! `host=… sslmode=… sslrootcert=…`). tokio-postgres reads `sslmode` only as far as
//! disable/prefer/require, never checks a certificate itself and knows no `sslrootcert`,
//! so this takes both out of the URL, gives tokio-postgres the rest and makes the rustls
//! connector (`tokio-postgres-rustls`; rustls's own crypto, aws-lc-rs, linked in: no
//! system OpenSSL) that does what
//! libpq would (its tests: `tests.rs`, in `tls/`):
//!
//! | sslmode       | TLS                     | the server's certificate                      |
//! |---------------|-------------------------|-----------------------------------------------|
//! | (none)        | never: NoTls, as always | -                                             |
//! | `disable`     | never                   | -                                             |
//! | `prefer`      | if the server offers it | not checked (with `sslrootcert`: its chain)   |
//! | `require`     | always                  | not checked (with `sslrootcert`: its chain)   |
//! | `verify-ca`   | always                  | chains to `sslrootcert`                       |
//! | `verify-full` | always                  | chains to `sslrootcert` and names the host    |
//!
//! `sslrootcert` is a PEM file of CA certificates, or `system`: the system's trusted CAs
//! (`rustls-native-certs`), which libpq 16 allows with `verify-full` only (anyone can buy a
//! certificate from a public CA; only the host name makes it mean something), and which
//! `sslmode` then defaults to. As in libpq, `verify-ca` and `verify-full` need
//! `sslrootcert`; unlike libpq, nothing is read from `~/.postgresql/`, and a `prefer` whose
//! handshake fails is an error, not a second try in plaintext. "The host" is the one the
//! connection went to, as the URL names it (a name, or an IP address that the certificate
//! must list). Every setting is checked, and the root certificates read, at start.

use futures_util::Stream;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use tokio_postgres::config::SslMode as PgSslMode;
use tokio_postgres::{AsyncMessage, Client, NoTls};
use tokio_postgres_rustls::MakeRustlsConnect;

/// A database to connect to: tokio-postgres's settings and the TLS the URL asked for.
#[derive(Clone)]
pub struct Target {
    pub config: tokio_postgres::Config,
    pub tls: Tls,
}

/// How connections are made.
#[derive(Clone)]
pub enum Tls {
    /// Without TLS (`NoTls`): a URL without `sslmode`, or with `sslmode=disable`.
    Off,
    /// Through rustls, checking the server's certificate as `sslmode` says.
    On(MakeRustlsConnect),
}

/// What a connection's driver yields: notifications, notices, errors.
pub type Messages = Pin<Box<dyn Stream<Item = Result<AsyncMessage, tokio_postgres::Error>> + Send>>;

impl Target {
    /// Reads a database URL as libpq would (see the module's table). The error names the
    /// parameter and its value, never the password.
    pub fn parse(url: &str) -> Result<Target, String> {
        let asked = split(url);
        let mut config: tokio_postgres::Config = asked.rest.parse().map_err(|e| format!("{e}"))?;
        let mode = asked.mode.as_deref().map(SslMode::parse).transpose()?;
        let root = asked.root.as_deref().map(RootCert::parse).transpose()?;
        let plan = plan(mode, root)?;
        if let Some(mode) = plan.tokio_mode {
            config.ssl_mode(mode);
        }
        let tls = match plan.check {
            None => Tls::Off,
            Some(check) => Tls::On(MakeRustlsConnect::new(client_config(&check)?)),
        };
        Ok(Target { config, tls })
    }
}

/// A config that tokio-postgres parsed by itself (tests, tools): no TLS, as before.
impl From<&tokio_postgres::Config> for Target {
    fn from(config: &tokio_postgres::Config) -> Self {
        Target {
            config: config.clone(),
            tls: Tls::Off,
        }
    }
}

impl Tls {
    /// One connection made outside a pool (the LISTEN connection), and its messages: the
    /// stream drives the connection and must be polled for the client to work.
    pub async fn connect(
        &self,
        config: &tokio_postgres::Config,
    ) -> Result<(Client, Messages), tokio_postgres::Error> {
        match self {
            Tls::Off => {
                let (client, mut connection) = config.connect(NoTls).await?;
                let messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
                Ok((client, Box::pin(messages)))
            }
            Tls::On(tls) => {
                let (client, mut connection) = config.connect(tls.clone()).await?;
                let messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
                Ok((client, Box::pin(messages)))
            }
        }
    }
}

/// An error and what caused it, down the chain: tokio-postgres says only "error performing
/// TLS handshake" or "db error" and keeps the reason (a certificate for another name, an
/// unknown CA, the server's FATAL) in `source()`.
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(error) = cause {
        text = format!("{text}: {error}");
        cause = error.source();
    }
    text
}

/// libpq's `sslmode` values but `allow` (plaintext first), which tokio-postgres cannot do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<SslMode, String> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => {
                return Err(format!(
                    "sslmode={value:?} is not one of disable, prefer, require, verify-ca, \
                     verify-full{}",
                    if value == "allow" {
                        " (allow, plaintext first, is not supported)"
                    } else {
                        ""
                    }
                ))
            }
        })
    }
}

/// Where the trusted CA certificates come from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RootCert {
    File(PathBuf),
    /// `sslrootcert=system`: the system's trust store.
    System,
}

impl RootCert {
    fn parse(value: &str) -> Result<RootCert, String> {
        match value {
            "" => {
                Err("sslrootcert is empty: name a PEM file of CA certificates, or `system`".into())
            }
            "system" => Ok(RootCert::System),
            path => Ok(RootCert::File(PathBuf::from(path))),
        }
    }
}

/// What is checked of the server's certificate, and against what.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Check {
    /// Nothing: encryption against eavesdropping, not against a man in the middle.
    Nothing,
    /// That it chains to these CAs (any name).
    Chain(RootCert),
    /// That it chains to these CAs and is the host's.
    ChainAndName(RootCert),
}

/// What tokio-postgres is told, and the rustls connector's check (None: NoTls).
#[derive(Debug, PartialEq, Eq)]
struct Plan {
    tokio_mode: Option<PgSslMode>,
    check: Option<Check>,
}

fn plan(mode: Option<SslMode>, root: Option<RootCert>) -> Result<Plan, String> {
    // No sslmode and no sslrootcert: exactly as before there was any of this.
    if mode.is_none() && root.is_none() {
        return Ok(Plan {
            tokio_mode: None,
            check: None,
        });
    }
    let mode = mode.unwrap_or(if root == Some(RootCert::System) {
        SslMode::VerifyFull
    } else {
        SslMode::Prefer
    });
    if root == Some(RootCert::System) && mode != SslMode::VerifyFull {
        return Err(format!(
            "sslrootcert=system needs sslmode=verify-full, not {}: a public CA signs \
             certificates for anyone, only the host name makes one mean something",
            mode.name()
        ));
    }
    let check = match (mode, root) {
        (SslMode::Disable, _) => {
            return Ok(Plan {
                tokio_mode: Some(PgSslMode::Disable),
                check: None,
            });
        }
        (SslMode::Prefer | SslMode::Require, None) => Check::Nothing,
        // libpq: with a root certificate, prefer and require check the chain too.
        (SslMode::Prefer | SslMode::Require, Some(root)) => Check::Chain(root),
        (SslMode::VerifyCa, Some(root)) => Check::Chain(root),
        (SslMode::VerifyFull, Some(root)) => Check::ChainAndName(root),
        (SslMode::VerifyCa | SslMode::VerifyFull, None) => {
            return Err(format!(
                "sslmode={} needs sslrootcert: a PEM file of the CA certificates to trust, \
                 or `system` for the system's (with verify-full)",
                mode.name()
            ))
        }
    };
    let tokio_mode = if mode == SslMode::Prefer {
        PgSslMode::Prefer
    } else {
        PgSslMode::Require
    };
    Ok(Plan {
        tokio_mode: Some(tokio_mode),
        check: Some(check),
    })
}

impl SslMode {
    fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// rustls's settings for `check`, with the root certificates read now.
fn client_config(check: &Check) -> Result<ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let algorithms = provider.signature_verification_algorithms;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let mut config = match check {
        Check::ChainAndName(root) => builder.with_root_certificates(roots(root)?),
        Check::Chain(root) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnly {
                roots: Arc::new(roots(root)?),
                algorithms,
            })),
        Check::Nothing => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unchecked { algorithms })),
    }
    .with_no_client_auth();
    // What libpq 17 sends; a server that negotiates TLS directly needs it.
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok(config)
}

fn roots(root: &RootCert) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    match root {
        RootCert::File(path) => {
            for cert in read_certificates(path)? {
                store.add(cert).map_err(|e| {
                    format!(
                        "sslrootcert {}: a certificate in it is not usable: {e}",
                        path.display()
                    )
                })?;
            }
        }
        RootCert::System => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                let errors: Vec<String> = found.errors.iter().map(|e| e.to_string()).collect();
                return Err(format!(
                    "sslrootcert=system: no CA certificate found in the system's store ({})",
                    if errors.is_empty() {
                        "none installed?".into()
                    } else {
                        errors.join("; ")
                    }
                ));
            }
        }
    }
    Ok(store)
}

fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = std::fs::read(path)
        .map_err(|e| format!("sslrootcert {}: cannot read it: {e}", path.display()))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("sslrootcert {}: not PEM certificates: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "sslrootcert {}: no certificate in it (PEM: -----BEGIN CERTIFICATE-----)",
            path.display()
        ));
    }
    Ok(certs)
}

/// verify-ca (and prefer/require with a root certificate): the chain, not the name.
#[derive(Debug)]
struct ChainOnly {
    roots: Arc<RootCertStore>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = rustls::server::ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.algorithms.all,
        )?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// prefer/require without a root certificate: any certificate (libpq's "no
/// verification"); the handshake's own signatures are still checked.
#[derive(Debug)]
struct Unchecked {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// The URL without `sslmode` and `sslrootcert`, and their values (the last of each wins,
/// as in libpq). Text this cannot read goes to tokio-postgres as it is, to be refused there.
#[derive(Debug, PartialEq, Eq)]
struct Asked {
    rest: String,
    mode: Option<String>,
    root: Option<String>,
}

fn split(url: &str) -> Asked {
    let unchanged = || Asked {
        rest: url.to_string(),
        mode: None,
        root: None,
    };
    let found = match ["postgresql://", "postgres://"]
        .iter()
        .find_map(|p| url.strip_prefix(p))
    {
        Some(after_scheme) => split_url(url, after_scheme),
        None => split_key_values(url),
    };
    found.unwrap_or_else(unchanged)
}

/// `postgresql://user:password@hosts/db?k=v&…`: the query starts at the first `?` after
/// the credentials (a password may hold a `?`; tokio-postgres reads it the same way).
fn split_url(url: &str, after_scheme: &str) -> Option<Asked> {
    let scheme_len = url.len() - after_scheme.len();
    let from = after_scheme.find('@').map_or(0, |at| at + 1);
    let question = scheme_len + from + after_scheme[from..].find('?')?;
    let (head, query) = (&url[..question], &url[question + 1..]);
    let (mut mode, mut root, mut kept) = (None, None, Vec::new());
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match decode(key)?.as_ref() {
            "sslmode" => mode = Some(decode(value)?.into_owned()),
            "sslrootcert" => root = Some(decode(value)?.into_owned()),
            _ => kept.push(pair),
        }
    }
    if mode.is_none() && root.is_none() {
        return None; // as it was, to the byte
    }
    let rest = if kept.is_empty() {
        head.to_string()
    } else {
        format!("{head}?{}", kept.join("&"))
    };
    Some(Asked { rest, mode, root })
}

fn decode(text: &str) -> Option<Cow<'_, str>> {
    percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .ok()
}

/// `host=… sslmode=verify-full sslrootcert='/a b/ca.pem' …` (values quoted with `'`,
/// `\` escaping the next character, as tokio-postgres and libpq read them).
fn split_key_values(text: &str) -> Option<Asked> {
    let (mut mode, mut root, mut rest) = (None, None, String::new());
    let mut chars = text.char_indices().peekable();
    let mut copied_to = 0;
    loop {
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let Some(&(start, _)) = chars.peek() else {
            break;
        };
        let mut key = String::new();
        while let Some((_, c)) = chars.next_if(|(_, c)| !c.is_whitespace() && *c != '=') {
            key.push(c);
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        chars.next_if(|(_, c)| *c == '=')?;
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if(|(_, c)| *c == '\'').is_some() {
            loop {
                match chars.next()? {
                    (_, '\'') => break,
                    (_, '\\') => value.push(chars.next()?.1),
                    (_, c) => value.push(c),
                }
            }
        } else {
            while let Some((_, c)) = chars.next_if(|(_, c)| !c.is_whitespace()) {
                if c == '\\' {
                    value.push(chars.next()?.1);
                } else {
                    value.push(c);
                }
            }
        }
        match key.as_str() {
            "sslmode" => mode = Some(value),
            "sslrootcert" => root = Some(value),
            _ => continue,
        }
        // Out, with the space after it.
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        rest.push_str(&text[copied_to..start]);
        copied_to = chars.peek().map_or(text.len(), |&(i, _)| i);
    }
    rest.push_str(&text[copied_to..]);
    Some(Asked { rest, mode, root })
}

#[cfg(test)]
mod tests;
