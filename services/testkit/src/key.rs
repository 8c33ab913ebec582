//! The test process's API key, and HTTP clients that send it.

/// This test process's API key: a random token, and a keys file (in the temp directory) that
/// holds its hash under the name `tests`. Every ingest a test starts reads that file
/// ([`Namespace::env`], [`auth_args`]); every client sends the token ([`client`]).
pub struct ApiKey {
    pub token: String,
    pub keys_file: std::path::PathBuf,
    /// The token alone, for k6 (`INGEST_KEY_FILE`).
    pub token_file: std::path::PathBuf,
}

pub fn api_key() -> &'static ApiKey {
    static KEY: std::sync::OnceLock<ApiKey> = std::sync::OnceLock::new();
    KEY.get_or_init(|| {
        let token = format!("pk_test_{}", uuid::Uuid::now_v7().simple());
        let keys_file = std::env::temp_dir().join(format!("pipeline-test-{}.keys", std::process::id()));
        let hash = <sha2::Sha256 as sha2::Digest>::digest(token.as_bytes());
        let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
        std::fs::write(&keys_file, format!("tests sha256:{hex}\n")).expect("write the test keys file");
        let token_file = std::env::temp_dir().join(format!("pipeline-test-{}.key", std::process::id()));
        std::fs::write(&token_file, format!("{token}\n")).expect("write the test token file");
        ApiKey { token, keys_file, token_file }
    })
}

/// The arguments that give an in-process ingest the test key.
pub fn auth_args() -> Vec<String> {
    vec!["--auth-keys".into(), api_key().keys_file.display().to_string()]
}

/// An HTTP client that sends the test key with every request.
pub fn client_builder() -> reqwest::ClientBuilder {
    let mut headers = reqwest::header::HeaderMap::new();
    let value = format!("Bearer {}", api_key().token);
    headers.insert(reqwest::header::AUTHORIZATION, value.parse().expect("a header value"));
    reqwest::Client::builder().default_headers(headers)
}

pub fn client() -> reqwest::Client {
    client_builder().build().expect("HTTP client")
}
