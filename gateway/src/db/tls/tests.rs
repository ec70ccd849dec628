//! db::tls: reading sslmode/sslrootcert out of a URL, the plan each pair makes, the
//! errors at start, and real handshakes (in memory, certificates made here) that each
//! check accepts what libpq would and refuses the rest.

use super::*;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use std::sync::atomic::{AtomicU32, Ordering};

fn asked(rest: &str, mode: Option<&str>, root: Option<&str>) -> Asked {
    Asked {
        rest: rest.to_string(),
        mode: mode.map(str::to_string),
        root: root.map(str::to_string),
    }
}

#[test]
fn a_url_without_tls_parameters_is_left_alone() {
    for url in [
        "postgresql://postgres@127.0.0.1:54329/pgplace",
        "postgresql://u:p@a:5432,b:5432/db?target_session_attrs=read-write&connect_timeout=2",
        "postgres://h/db?",
        "host=/var/run/postgresql dbname=pgplace",
        "",
    ] {
        assert_eq!(split(url), asked(url, None, None), "{url}");
    }
}

#[test]
fn url_parameters_are_taken_out_and_decoded() {
    assert_eq!(
        split(
            "postgresql://u:p@a:5432,b:5432/pgplace?target_session_attrs=read-write&sslmode=verify-full\
             &connect_timeout=2&sslrootcert=/run/pgplace-ha/ca.crt"
        ),
        asked(
            "postgresql://u:p@a:5432,b:5432/pgplace?target_session_attrs=read-write&connect_timeout=2",
            Some("verify-full"),
            Some("/run/pgplace-ha/ca.crt")
        )
    );
    // Only TLS parameters: no `?` left. Percent-encoding in keys and values, as libpq.
    assert_eq!(
        split("postgres://h/db?ssl%6Dode=verify-ca&sslrootcert=%2Fetc%2Fmy%20ca.pem"),
        asked("postgres://h/db", Some("verify-ca"), Some("/etc/my ca.pem"))
    );
    // The last value wins (libpq).
    assert_eq!(
        split("postgresql://h/db?sslmode=disable&sslmode=require"),
        asked("postgresql://h/db", Some("require"), None)
    );
    // A password may hold `?` and `&`: the query starts after the credentials.
    assert_eq!(
        split("postgresql://u:p?a&sslmode=x@h/db?sslmode=require&application_name=a"),
        asked(
            "postgresql://u:p?a&sslmode=x@h/db?application_name=a",
            Some("require"),
            None
        )
    );
}

#[test]
fn key_value_parameters_are_taken_out_with_quotes_and_escapes() {
    assert_eq!(
        split(
            "host=a,b sslmode=verify-full dbname=pgplace sslrootcert='/etc/my ca\\'s.pem' user=u"
        ),
        asked(
            "host=a,b dbname=pgplace user=u",
            Some("verify-full"),
            Some("/etc/my ca's.pem")
        )
    );
    assert_eq!(
        split("sslmode = require host=h sslrootcert=/a\\ b.pem"),
        asked("host=h ", Some("require"), Some("/a b.pem"))
    );
    // Quoted values of other keys are copied as they were.
    assert_eq!(
        split("password='a b' sslmode=prefer"),
        asked("password='a b' ", Some("prefer"), None)
    );
    // Text this cannot read goes on untouched, for tokio-postgres to refuse.
    assert_eq!(split("host=h sslmode"), asked("host=h sslmode", None, None));
    assert_eq!(
        split("sslrootcert='/unterminated"),
        asked("sslrootcert='/unterminated", None, None)
    );
}

#[test]
fn the_plan_follows_libpq() {
    use PgSslMode as Pg;
    let file = || Some(RootCert::File("/ca.pem".into()));
    // sslmode, sslrootcert -> what tokio-postgres is told, what the connector checks.
    type Case = (Option<SslMode>, Option<RootCert>, Option<Pg>, Option<Check>);
    let cases: Vec<Case> = vec![
        (None, None, None, None),
        (Some(SslMode::Disable), None, Some(Pg::Disable), None),
        (Some(SslMode::Disable), file(), Some(Pg::Disable), None),
        (
            Some(SslMode::Prefer),
            None,
            Some(Pg::Prefer),
            Some(Check::Nothing),
        ),
        (
            Some(SslMode::Require),
            None,
            Some(Pg::Require),
            Some(Check::Nothing),
        ),
        (
            Some(SslMode::Require),
            file(),
            Some(Pg::Require),
            Some(Check::Chain(file().unwrap())),
        ),
        (
            None,
            file(),
            Some(Pg::Prefer),
            Some(Check::Chain(file().unwrap())),
        ),
        (
            Some(SslMode::VerifyCa),
            file(),
            Some(Pg::Require),
            Some(Check::Chain(file().unwrap())),
        ),
        (
            Some(SslMode::VerifyFull),
            file(),
            Some(Pg::Require),
            Some(Check::ChainAndName(file().unwrap())),
        ),
        (
            None,
            Some(RootCert::System),
            Some(Pg::Require),
            Some(Check::ChainAndName(RootCert::System)),
        ),
    ];
    for (mode, root, tokio_mode, check) in cases {
        let label = format!("{mode:?} {root:?}");
        assert_eq!(
            plan(mode, root).unwrap(),
            Plan { tokio_mode, check },
            "{label}"
        );
    }
}

#[test]
fn what_libpq_refuses_is_refused_at_start() {
    let err = |url: &str| match Target::parse(url) {
        Ok(_) => panic!("{url} was accepted"),
        Err(e) => e,
    };
    let e = err("postgresql://h/db?sslmode=verify-full");
    assert!(e.contains("sslmode=verify-full needs sslrootcert"), "{e}");
    let e = err("host=h sslmode=verify-ca");
    assert!(e.contains("sslmode=verify-ca needs sslrootcert"), "{e}");
    let e = err("postgresql://h/db?sslmode=verify_full");
    assert!(
        e.contains(
            "\"verify_full\" is not one of disable, prefer, require, verify-ca, verify-full"
        ),
        "{e}"
    );
    let e = err("postgresql://h/db?sslmode=allow");
    assert!(
        e.contains("allow, plaintext first, is not supported"),
        "{e}"
    );
    let e = err("postgresql://h/db?sslmode=require&sslrootcert=system");
    assert!(
        e.contains("sslrootcert=system needs sslmode=verify-full, not require"),
        "{e}"
    );
    let e = err("postgresql://h/db?sslrootcert=");
    assert!(e.contains("sslrootcert is empty"), "{e}");
    let e = err("postgresql://h/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem");
    assert!(
        e.starts_with("sslrootcert /nonexistent/ca.pem: cannot read it:"),
        "{e}"
    );
    let empty = temp_file("empty.pem", "not a certificate\n");
    let e = err(&format!(
        "host=h sslmode=verify-full sslrootcert={}",
        empty.display()
    ));
    assert!(e.contains("no certificate in it"), "{e}");
    let broken = temp_file("broken.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n");
    let e = err(&format!(
        "host=h sslmode=verify-full sslrootcert={}",
        broken.display()
    ));
    assert!(e.contains("not PEM certificates"), "{e}");
    // The password is never in an error.
    let e = err("postgresql://u:secret@h/db?sslmode=bogus");
    assert!(!e.contains("secret"), "{e}");
    let e = err("postgresql://u:secret@h/db?bogus=1");
    assert!(!e.contains("secret"), "{e}");
}

#[test]
fn without_sslmode_the_config_is_what_tokio_postgres_reads() {
    for url in [
        "postgresql://u:p@a:5432,b:5433/pgplace?target_session_attrs=read-write&connect_timeout=2",
        "host=/var/run/postgresql dbname=pgplace user=gw",
    ] {
        let target = Target::parse(url).unwrap();
        assert!(matches!(target.tls, Tls::Off), "{url}");
        let plain: tokio_postgres::Config = url.parse().unwrap();
        assert_eq!(
            format!("{:?}", target.config),
            format!("{plain:?}"),
            "{url}"
        );
        assert_eq!(target.config.get_ssl_mode(), PgSslMode::Prefer);
    }
}

#[test]
fn with_sslmode_the_rest_reaches_tokio_postgres() {
    let pki = Pki::new();
    let ca = temp_file("ca.pem", &pki.ca_pem);
    let url = format!(
        "postgresql://gw:pw@ha-node-1:5432,ha-node-2:5432/pgplace?target_session_attrs=read-write\
         &sslmode=verify-full&sslrootcert={}&connect_timeout=2",
        ca.display()
    );
    let target = Target::parse(&url).unwrap();
    assert!(matches!(target.tls, Tls::On(_)));
    let config = &target.config;
    assert_eq!(config.get_ssl_mode(), PgSslMode::Require);
    assert_eq!(config.get_hosts().len(), 2);
    assert_eq!(config.get_dbname(), Some("pgplace"));
    assert_eq!(
        config.get_connect_timeout(),
        Some(&std::time::Duration::from_secs(2))
    );
    let disabled = Target::parse("host=h sslmode=disable").unwrap();
    assert!(matches!(disabled.tls, Tls::Off));
    assert_eq!(disabled.config.get_ssl_mode(), PgSslMode::Disable);
}

// --- handshakes -----------------------------------------------------------------------

/// A CA, a server certificate it signed for `db.example` and 127.0.0.1, and one signed by
/// another CA for the same names.
struct Pki {
    ca_pem: String,
    server: Arc<rustls::ServerConfig>,
    stranger: Arc<rustls::ServerConfig>,
}

impl Pki {
    fn new() -> Pki {
        let (ca_pem, server) = Self::ca_and_server("pgplace test CA");
        let (_, stranger) = Self::ca_and_server("someone else's CA");
        Pki {
            ca_pem,
            server,
            stranger,
        }
    }

    fn ca_and_server(ca_name: &str) -> (String, Arc<rustls::ServerConfig>) {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, ca_name);
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::from_params(&ca_params, &ca_key);
        let key = KeyPair::generate().unwrap();
        let params =
            CertificateParams::new(vec!["db.example".to_string(), "127.0.0.1".to_string()])
                .unwrap();
        let cert = params.signed_by(&key, &issuer).unwrap();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let server = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .unwrap();
        (ca.pem(), Arc::new(server))
    }
}

/// A TLS handshake in memory: the client as `check` makes it, connecting to `host`.
async fn handshake(
    check: &Check,
    host: &str,
    server: &Arc<rustls::ServerConfig>,
) -> Result<(), String> {
    let client = tokio_rustls::TlsConnector::from(Arc::new(client_config(check)?));
    let acceptor = tokio_rustls::TlsAcceptor::from(server.clone());
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    let serving = tokio::spawn(async move { acceptor.accept(server_io).await.map(drop) });
    let name = ServerName::try_from(host.to_string()).unwrap();
    let result = client
        .connect(name, client_io)
        .await
        .map(drop)
        .map_err(|e| e.to_string());
    serving.abort();
    result
}

#[tokio::test]
async fn each_check_accepts_what_libpq_accepts_and_refuses_the_rest() {
    let pki = Pki::new();
    let ca = RootCert::File(temp_file("ca.pem", &pki.ca_pem));
    let full = Check::ChainAndName(ca.clone());
    let chain = Check::Chain(ca);
    // verify-full: our CA and the name connected to (a DNS name or an IP address).
    handshake(&full, "db.example", &pki.server).await.unwrap();
    handshake(&full, "127.0.0.1", &pki.server).await.unwrap();
    let e = handshake(&full, "other.example", &pki.server)
        .await
        .unwrap_err();
    assert!(e.contains("not valid for name"), "{e}");
    let e = handshake(&full, "db.example", &pki.stranger)
        .await
        .unwrap_err();
    assert!(e.contains("UnknownIssuer"), "{e}");
    // verify-ca: our CA, any name.
    handshake(&chain, "db.example", &pki.server).await.unwrap();
    handshake(&chain, "other.example", &pki.server)
        .await
        .unwrap();
    let e = handshake(&chain, "db.example", &pki.stranger)
        .await
        .unwrap_err();
    assert!(e.contains("UnknownIssuer"), "{e}");
    // require: encrypted, nothing checked.
    handshake(&Check::Nothing, "other.example", &pki.stranger)
        .await
        .unwrap();
}

#[test]
fn the_system_store_is_read_for_sslrootcert_system() {
    // Debian's ca-certificates (the gateway image has it): some CA is there.
    if !Path::new("/etc/ssl/certs/ca-certificates.crt").exists() {
        return;
    }
    Target::parse("postgresql://h/db?sslrootcert=system").unwrap();
}

fn temp_file(name: &str, text: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "pgplace-tls-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}
