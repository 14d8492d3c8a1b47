//! SCRAM-SHA-256 (RFC 5802 and 7677) as PostgreSQL runs it: the server keeps only a verifier (salt,
//! iteration count, StoredKey, ServerKey — the format of `pg_authid.rolpassword`), never the password;
//! channel binding is not offered (numadb does not speak TLS), so the client's GS2 header must be `n,,` or
//! `y,,`.
//!
//! Written here with RustCrypto's pure-Rust SHA-256, HMAC and PBKDF2 (pgwire's SCRAM needs a TLS backend
//! built from C), and checked against RFC 7677's test vector and against psql and psycopg in the tests.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

/// The mechanism's name in `AuthenticationSASL`.
pub const MECHANISM: &str = "SCRAM-SHA-256";
/// PBKDF2 iterations for verifiers made here (PostgreSQL's `scram_iterations` default).
pub const ITERATIONS_DEFAULT: u32 = 4096;
/// Random bytes in a salt.
const SALT_BYTES: usize = 16;
/// Random bytes in the server's part of the nonce (PostgreSQL's `SCRAM_RAW_NONCE_LEN`).
const NONCE_BYTES: usize = 18;
/// A verifier is refused above this many iterations (a configuration error, not an attack: it only makes the
/// server slow).
const ITERATIONS_MAX: u32 = 10_000_000;

type HmacSha256 = Hmac<Sha256>;

/// What the server stores for a user.
#[derive(Clone, PartialEq, Eq)]
pub struct Verifier {
    iterations: u32,
    salt: Vec<u8>,
    stored_key: [u8; 32],
    server_key: [u8; 32],
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Verifier(SCRAM-SHA-256, …)")
    }
}

fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// Random bytes from the operating system.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).expect("the operating system's random source works");
    bytes
}

impl Verifier {
    /// A verifier for `password` with a fresh random salt.
    pub fn from_password(password: &str) -> Verifier {
        Verifier::derive(password, &random_bytes::<SALT_BYTES>(), ITERATIONS_DEFAULT)
    }

    /// A verifier for `password` with a given salt and iteration count.
    pub fn derive(password: &str, salt: &[u8], iterations: u32) -> Verifier {
        // SASLprep as PostgreSQL does it: a password it cannot normalise is used as given.
        let prepared = stringprep::saslprep(password).map(|p| p.into_owned()).unwrap_or_else(|_| password.to_string());
        let mut salted = [0u8; 32];
        pbkdf2::pbkdf2_hmac::<Sha256>(prepared.as_bytes(), salt, iterations, &mut salted);
        let client_key = hmac(&salted, &[b"Client Key"]);
        Verifier {
            iterations,
            salt: salt.to_vec(),
            stored_key: sha256(&client_key),
            server_key: hmac(&salted, &[b"Server Key"]),
        }
    }

    /// Parses PostgreSQL's text form, `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>` (base64).
    pub fn parse(text: &str) -> Result<Verifier, String> {
        let malformed = || "not a SCRAM-SHA-256 verifier (SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>)";
        let rest = text.trim().strip_prefix("SCRAM-SHA-256$").ok_or_else(malformed)?;
        let (head, keys) = rest.split_once('$').ok_or_else(malformed)?;
        let (iterations, salt) = head.split_once(':').ok_or_else(malformed)?;
        let (stored, server) = keys.split_once(':').ok_or_else(malformed)?;
        let iterations: u32 = iterations.parse().map_err(|_| malformed())?;
        if iterations == 0 || iterations > ITERATIONS_MAX {
            return Err(format!("{iterations} iterations: expected 1 to {ITERATIONS_MAX}"));
        }
        let salt = BASE64.decode(salt).map_err(|_| malformed())?;
        let key = |text: &str| -> Result<[u8; 32], String> {
            BASE64.decode(text).ok().and_then(|k| <[u8; 32]>::try_from(k).ok()).ok_or_else(|| malformed().to_string())
        };
        Ok(Verifier { iterations, salt, stored_key: key(stored)?, server_key: key(server)? })
    }

    /// A secret given in a password file: a verifier when it looks like one, else a password.
    pub fn from_secret(secret: &str) -> Result<Verifier, String> {
        if secret.starts_with("SCRAM-SHA-256$") { Verifier::parse(secret) } else { Ok(Verifier::from_password(secret)) }
    }

    /// A verifier no password matches, the same for the same user (PostgreSQL's mock authentication, so that a
    /// client learns nothing about which users exist).
    pub fn mock(user: &str, server_secret: &[u8; 32]) -> Verifier {
        let salt = hmac(server_secret, &[b"salt", user.as_bytes()]);
        Verifier {
            iterations: ITERATIONS_DEFAULT,
            salt: salt[..SALT_BYTES].to_vec(),
            stored_key: hmac(server_secret, &[b"stored", user.as_bytes()]),
            server_key: hmac(server_secret, &[b"server", user.as_bytes()]),
        }
    }
}

impl std::fmt::Display for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SCRAM-SHA-256${}:{}${}:{}",
            self.iterations,
            BASE64.encode(&self.salt),
            BASE64.encode(self.stored_key),
            BASE64.encode(self.server_key)
        )
    }
}

/// Why an exchange failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScramError {
    /// The client's message is not SCRAM (SQLSTATE 08P01).
    Malformed(String),
    /// The proof is wrong: wrong password or unknown user (28P01).
    Failed,
}

/// One SCRAM exchange, server side.
pub struct ScramExchange {
    verifier: Verifier,
    /// The user does not exist: the exchange runs to the end and then fails.
    mock: bool,
    server_nonce: String,
    /// `client-first-message-bare`, `server-first-message`, the GS2 header and the combined nonce, once the
    /// first message was read.
    first: Option<(String, String, String, String)>,
}

impl ScramExchange {
    /// An exchange against `verifier`; `mock` makes it fail whatever the client proves.
    pub fn new(verifier: Verifier, mock: bool) -> Self {
        ScramExchange::with_nonce(verifier, mock, BASE64.encode(random_bytes::<NONCE_BYTES>()))
    }

    fn with_nonce(verifier: Verifier, mock: bool, server_nonce: String) -> Self {
        ScramExchange { verifier, mock, server_nonce, first: None }
    }

    /// Reads `client-first-message`; returns `server-first-message`.
    pub fn client_first(&mut self, message: &[u8]) -> Result<Vec<u8>, ScramError> {
        let malformed = |what: &str| ScramError::Malformed(format!("malformed SCRAM message: {what}"));
        let message = std::str::from_utf8(message).map_err(|_| malformed("not UTF-8"))?;
        let (flag, rest) = message.split_once(',').ok_or_else(|| malformed("no GS2 header"))?;
        match flag {
            "n" | "y" => {}
            flag if flag.starts_with("p=") => {
                return Err(ScramError::Malformed(
                    "the client requires SCRAM channel binding, which numadb does not support (it does not use TLS)"
                        .into(),
                ));
            }
            _ => return Err(malformed("unexpected channel-binding flag")),
        }
        let (authzid, bare) = rest.split_once(',').ok_or_else(|| malformed("no GS2 header"))?;
        if !authzid.is_empty() {
            return Err(ScramError::Malformed("client uses authorization identity, but it is not supported".into()));
        }
        let gs2_header = format!("{flag},{authzid},");
        let mut client_nonce = None;
        for (i, attribute) in bare.split(',').enumerate() {
            match (i, attribute.split_once('=')) {
                (0, Some(("n", _))) => {}
                (1, Some(("r", nonce))) if !nonce.is_empty() && nonce.bytes().all(|b| (0x21..0x7f).contains(&b)) => {
                    client_nonce = Some(nonce)
                }
                (0 | 1, _) => return Err(malformed("expected n= and r= attributes")),
                _ => {}
            }
        }
        let client_nonce = client_nonce.ok_or_else(|| malformed("no nonce"))?;
        let nonce = format!("{client_nonce}{}", self.server_nonce);
        let server_first = format!("r={nonce},s={},i={}", BASE64.encode(&self.verifier.salt), self.verifier.iterations);
        self.first = Some((bare.to_string(), server_first.clone(), gs2_header, nonce));
        Ok(server_first.into_bytes())
    }

    /// Reads `client-final-message` and checks the proof; returns `server-final-message`.
    pub fn client_final(&mut self, message: &[u8]) -> Result<Vec<u8>, ScramError> {
        let malformed = |what: &str| ScramError::Malformed(format!("malformed SCRAM message: {what}"));
        let (client_first_bare, server_first, gs2_header, nonce) =
            self.first.take().ok_or_else(|| malformed("unexpected client-final-message"))?;
        let message = std::str::from_utf8(message).map_err(|_| malformed("not UTF-8"))?;
        let (without_proof, proof) = message.rsplit_once(",p=").ok_or_else(|| malformed("no proof"))?;
        let mut attributes = without_proof.split(',');
        let binding = attributes.next().and_then(|a| a.strip_prefix("c=")).ok_or_else(|| malformed("no c="))?;
        let client_nonce = attributes.next().and_then(|a| a.strip_prefix("r=")).ok_or_else(|| malformed("no r="))?;
        if BASE64.decode(binding).ok().as_deref() != Some(gs2_header.as_bytes()) {
            return Err(malformed("unexpected SCRAM channel-binding attribute in client-final-message"));
        }
        if client_nonce != nonce {
            return Err(malformed("SCRAM nonce mismatch"));
        }
        let proof = BASE64
            .decode(proof)
            .ok()
            .and_then(|p| <[u8; 32]>::try_from(p).ok())
            .ok_or_else(|| malformed("invalid proof"))?;
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let client_signature = hmac(&self.verifier.stored_key, &[auth_message.as_bytes()]);
        let mut client_key = [0u8; 32];
        for (k, (p, s)) in client_key.iter_mut().zip(proof.iter().zip(&client_signature)) {
            *k = p ^ s;
        }
        if !constant_time_eq(&sha256(&client_key), &self.verifier.stored_key) || self.mock {
            return Err(ScramError::Failed);
        }
        let server_signature = hmac(&self.verifier.server_key, &[auth_message.as_bytes()]);
        Ok(format!("v={}", BASE64.encode(server_signature)).into_bytes())
    }
}

fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The client's side (for tests and for `numadb bench`'s own clients): the proof for a server-first message.
#[cfg(test)]
fn client_proof(
    password: &str,
    client_first_bare: &str,
    server_first: &str,
    client_final_without_proof: &str,
) -> String {
    let mut parts = server_first.split(',');
    let salt = BASE64.decode(parts.nth(1).unwrap().strip_prefix("s=").unwrap()).unwrap();
    let iterations: u32 = server_first.rsplit_once("i=").unwrap().1.parse().unwrap();
    let mut salted = [0u8; 32];
    pbkdf2::pbkdf2_hmac::<Sha256>(password.as_bytes(), &salt, iterations, &mut salted);
    let client_key = hmac(&salted, &[b"Client Key"]);
    let stored_key = sha256(&client_key);
    let auth_message = format!("{client_first_bare},{server_first},{client_final_without_proof}");
    let signature = hmac(&stored_key, &[auth_message.as_bytes()]);
    let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(k, s)| k ^ s).collect();
    BASE64.encode(proof)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677, section 3.
    #[test]
    fn rfc_7677_test_vector() {
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let verifier = Verifier::derive("pencil", &salt, 4096);
        let mut exchange = ScramExchange::with_nonce(verifier.clone(), false, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".into());
        let server_first = exchange.client_first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO").unwrap();
        assert_eq!(
            String::from_utf8(server_first).unwrap(),
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
        );
        let server_final = exchange
            .client_final(
                b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
            )
            .unwrap();
        assert_eq!(String::from_utf8(server_final).unwrap(), "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
        // The verifier survives its text form.
        assert_eq!(Verifier::parse(&verifier.to_string()).unwrap(), verifier);
    }

    fn run(verifier: Verifier, mock: bool, password: &str) -> Result<Vec<u8>, ScramError> {
        let mut exchange = ScramExchange::new(verifier, mock);
        let server_first = String::from_utf8(exchange.client_first(b"n,,n=,r=abcdef").unwrap()).unwrap();
        let nonce = server_first.split(',').next().unwrap().strip_prefix("r=").unwrap().to_string();
        let without_proof = format!("c=biws,r={nonce}");
        let proof = client_proof(password, "n=,r=abcdef", &server_first, &without_proof);
        exchange.client_final(format!("{without_proof},p={proof}").as_bytes())
    }

    #[test]
    fn right_and_wrong_passwords_and_unknown_users() {
        let verifier = Verifier::from_password("secret");
        assert!(run(verifier.clone(), false, "secret").is_ok());
        assert_eq!(run(verifier.clone(), false, "wrong"), Err(ScramError::Failed));
        assert_eq!(run(verifier, true, "secret"), Err(ScramError::Failed));
        let mock = Verifier::mock("nobody", &[7; 32]);
        assert_eq!(mock, Verifier::mock("nobody", &[7; 32]), "the same salt every time for a user");
        assert_ne!(mock.salt, Verifier::mock("somebody", &[7; 32]).salt);
    }

    #[test]
    fn malformed_messages_are_refused() {
        let mut exchange = ScramExchange::new(Verifier::from_password("x"), false);
        for message in [&b"p=tls-server-end-point,,n=,r=x"[..], b"n,a=admin,n=,r=x", b"garbage", b"n,,n=", b"\xff"] {
            assert!(matches!(exchange.client_first(message), Err(ScramError::Malformed(_))));
        }
        assert!(matches!(exchange.client_final(b"c=biws,r=x,p=AAAA"), Err(ScramError::Malformed(_))));
        let mut exchange = ScramExchange::new(Verifier::from_password("x"), false);
        exchange.client_first(b"n,,n=,r=abc").unwrap();
        assert!(matches!(exchange.client_final(b"c=biws,r=wrongnonce,p=AAAA"), Err(ScramError::Malformed(_))));
        assert!(Verifier::parse("SCRAM-SHA-256$0:AA==$AA==:AA==").is_err());
        assert!(Verifier::parse("md5abc").is_err());
    }
}
