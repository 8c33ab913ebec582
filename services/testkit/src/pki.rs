//! A throwaway PKI for the TLS tests.

/// A throwaway PKI for the TLS tests, made with the openssl command in a temporary folder: a CA,
/// a server certificate it signs for `localhost` and 127.0.0.1, and a second, unrelated CA (the
/// "wrong CA" a client must refuse).
pub struct Pki {
    pub dir: std::path::PathBuf,
    pub ca: std::path::PathBuf,
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
    /// The certificate and its key in one file (stunnel's form).
    pub cert_and_key: std::path::PathBuf,
    pub other_ca: std::path::PathBuf,
}

pub fn pki() -> Pki {
    let dir = std::env::temp_dir().join(format!("pipeline-pki-{}", uuid::Uuid::now_v7().simple()));
    std::fs::create_dir_all(&dir).expect("pki dir");
    let run = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("openssl (apt: openssl)");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    for ca in ["ca", "other-ca"] {
        run(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN=pipeline test {ca}"),
        ]
        .iter()
        .copied()
        .chain(["-keyout", &format!("{ca}.key"), "-out", &format!("{ca}.pem")])
        .collect::<Vec<_>>());
    }
    std::fs::write(dir.join("san.ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n").expect("san");
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=localhost",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
    ]);
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "san.ext",
        "-out",
        "server.pem",
    ]);
    let both =
        [std::fs::read(dir.join("server.pem")).expect("cert"), std::fs::read(dir.join("server.key")).expect("key")]
            .concat();
    std::fs::write(dir.join("server-both.pem"), both).expect("cert and key");
    Pki {
        ca: dir.join("ca.pem"),
        cert: dir.join("server.pem"),
        key: dir.join("server.key"),
        cert_and_key: dir.join("server-both.pem"),
        other_ca: dir.join("other-ca.pem"),
        dir,
    }
}
