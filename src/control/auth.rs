//! The pre-shared key: mutual HMAC-SHA256 challenge-response on the control connection, and
//! the data connections' cookie derived from the same exchange.
//!
//! ```text
//! client                                   server
//! Hello { nonce: Nc }           ->
//!                               <-  Challenge { nonce: Ns }
//! Auth { proof: HMAC(K, "client" | Ns | Nc) } ->
//!                               <-  Welcome { proof: HMAC(K, "server" | Ns | Nc), .. }
//! ```
//!
//! Neither nonce is chosen by the other side, so neither proof can be replayed; the labels keep
//! one side's proof from serving as the other's. The key itself never crosses the wire, and
//! the test cookie (what a data connection presents) is HMAC(K, "cookie" | Ns | Nc) rather
//! than a value sent over the control connection, so that someone who can read the control
//! connection still cannot present it. What this does not give: secrecy or integrity of the
//! control messages after the handshake (there is no TLS on it); see SECURITY.md.

use std::fmt;
use std::io::Read;
use std::path::Path;

use anyhow::{bail, Context, Result};
use ring::hmac;

use crate::transport::Cookie;

/// The environment variable holding a key, for either side.
pub const PSK_ENV: &str = "WIREBENCH_PSK";
/// What a server with a key answers a client without one.
pub const NEEDS_KEY: &str = "this server requires a pre-shared key (--psk-file or WIREBENCH_PSK)";
/// What a server answers a wrong proof. Says nothing about what was wrong.
pub const AUTH_FAILED: &str = "authentication failed";
/// Shortest key accepted: a guessable key would make the challenge-response worthless.
pub const MIN_KEY: usize = 16;
/// Largest key file read: a key is a line, not a file of any size.
const MAX_KEY_FILE: u64 = 4096;

const CLIENT_LABEL: &[u8] = b"wirebench control 1: client proof";
const SERVER_LABEL: &[u8] = b"wirebench control 1: server proof";
const COOKIE_LABEL: &[u8] = b"wirebench control 1: data cookie";

/// A pre-shared key. Its bytes are not kept outside ring's HMAC key, and are never printed.
/// Cloned into a session's state machine, which drops it after the handshake.
#[derive(Clone)]
pub struct Psk {
    key: hmac::Key,
}

impl fmt::Debug for Psk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Psk(..)")
    }
}

impl Psk {
    pub fn new(secret: &[u8]) -> Result<Psk> {
        if secret.len() < MIN_KEY {
            bail!(
                "the pre-shared key is {} bytes; use at least {MIN_KEY} (e.g. `head -c 32 /dev/urandom | base64`)",
                secret.len()
            );
        }
        Ok(Psk {
            key: hmac::Key::new(hmac::HMAC_SHA256, secret),
        })
    }

    /// The key of `--psk-file FILE` if given, else of WIREBENCH_PSK if set and not empty.
    pub fn load(file: Option<&Path>) -> Result<Option<Psk>> {
        if let Some(path) = file {
            return Psk::from_file(path).map(Some);
        }
        match std::env::var_os(PSK_ENV) {
            Some(v) if !v.is_empty() => {
                use std::os::unix::ffi::OsStrExt;
                Psk::new(trim_line(v.as_bytes())).context(PSK_ENV).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// The key is the file's content without its line end (what `echo KEY > FILE` writes).
    pub fn from_file(path: &Path) -> Result<Psk> {
        let file = std::fs::File::open(path)
            .with_context(|| format!("cannot read the pre-shared key {}", path.display()))?;
        warn_if_readable_by_others(&file, path);
        let mut bytes = Vec::new();
        file.take(MAX_KEY_FILE + 1)
            .read_to_end(&mut bytes)
            .with_context(|| format!("cannot read the pre-shared key {}", path.display()))?;
        if bytes.len() as u64 > MAX_KEY_FILE {
            bail!(
                "{} is over {MAX_KEY_FILE} bytes: not a pre-shared key",
                path.display()
            );
        }
        Psk::new(trim_line(&bytes)).with_context(|| path.display().to_string())
    }

    fn tag(&self, label: &[u8], server: &Nonce, client: &Nonce) -> hmac::Tag {
        let mut ctx = hmac::Context::with_key(&self.key);
        ctx.update(label);
        ctx.update(&server.0);
        ctx.update(&client.0);
        ctx.sign()
    }

    fn verify(&self, label: &[u8], server: &Nonce, client: &Nonce, proof: &str) -> bool {
        let Some(proof) = from_hex(proof) else {
            return false;
        };
        let mut msg = Vec::with_capacity(label.len() + 2 * NONCE_LEN);
        msg.extend_from_slice(label);
        msg.extend_from_slice(&server.0);
        msg.extend_from_slice(&client.0);
        // Constant time: a timing difference must not tell how much of a proof was right.
        hmac::verify(&self.key, &msg, &proof).is_ok()
    }

    /// The client's answer to the server's challenge.
    pub fn client_proof(&self, server: &Nonce, client: &Nonce) -> String {
        to_hex(self.tag(CLIENT_LABEL, server, client).as_ref())
    }

    pub fn verify_client(&self, server: &Nonce, client: &Nonce, proof: &str) -> bool {
        self.verify(CLIENT_LABEL, server, client, proof)
    }

    /// The server's proof back, in its Welcome.
    pub fn server_proof(&self, server: &Nonce, client: &Nonce) -> String {
        to_hex(self.tag(SERVER_LABEL, server, client).as_ref())
    }

    pub fn verify_server(&self, server: &Nonce, client: &Nonce, proof: &str) -> bool {
        self.verify(SERVER_LABEL, server, client, proof)
    }

    /// The cookie the data connections of this session present: both ends derive it, neither
    /// sends it.
    pub fn cookie(&self, server: &Nonce, client: &Nonce) -> Cookie {
        let t = self.tag(COOKIE_LABEL, server, client);
        let mut c = [0u8; 16];
        c.copy_from_slice(&t.as_ref()[..16]);
        Cookie(c)
    }

    /// HMAC(K, label | data): key material for another use of the same key (the relay's UDP
    /// leg), kept apart from the control handshake's by its label.
    pub fn derive(&self, label: &[u8], data: &[u8]) -> [u8; 32] {
        let mut ctx = hmac::Context::with_key(&self.key);
        ctx.update(label);
        ctx.update(data);
        let mut out = [0u8; 32];
        out.copy_from_slice(ctx.sign().as_ref());
        out
    }
}

fn trim_line(b: &[u8]) -> &[u8] {
    let mut end = b.len();
    while end > 0 && matches!(b[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    &b[..end]
}

fn warn_if_readable_by_others(file: &std::fs::File, path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(m) = file.metadata() {
        if m.permissions().mode() & 0o077 != 0 {
            eprintln!(
                "wirebench: warning: the pre-shared key {} is readable by other users (chmod 600 it)",
                path.display()
            );
        }
    }
}

const NONCE_LEN: usize = 32;

/// A fresh random value of one side of one handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nonce([u8; NONCE_LEN]);

impl Nonce {
    pub fn random() -> Result<Nonce> {
        let mut b = [0u8; NONCE_LEN];
        getrandom::fill(&mut b).map_err(|e| anyhow::anyhow!("no randomness for a nonce: {e}"))?;
        Ok(Nonce(b))
    }

    pub fn to_hex(&self) -> String {
        to_hex(&self.0)
    }

    pub fn from_hex(s: &str) -> Option<Nonce> {
        from_hex(s)?.try_into().ok().map(Nonce)
    }
}

fn to_hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || s.len() > 256 || !s.is_ascii() {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::framing::write_frame;
    use crate::control::protocol::{ClientMessage, ServerMessage};

    const KEY: &[u8] = b"correct horse battery staple 42";

    fn contains(hay: &[u8], needle: &[u8]) -> bool {
        hay.windows(needle.len()).any(|w| w == needle)
    }

    #[test]
    fn the_right_key_passes_both_ways_and_a_wrong_one_neither() {
        let server = Psk::new(KEY).unwrap();
        let client = Psk::new(KEY).unwrap();
        let wrong = Psk::new(b"correct horse battery staple 43").unwrap();
        let (ns, nc) = (Nonce::random().unwrap(), Nonce::random().unwrap());

        // The client proves itself; the server proves itself back.
        assert!(server.verify_client(&ns, &nc, &client.client_proof(&ns, &nc)));
        assert!(client.verify_server(&ns, &nc, &server.server_proof(&ns, &nc)));
        // Both derive the same cookie without sending it.
        assert_eq!(server.cookie(&ns, &nc), client.cookie(&ns, &nc));

        // A wrong key fails either way, and derives another cookie.
        assert!(!server.verify_client(&ns, &nc, &wrong.client_proof(&ns, &nc)));
        assert!(!client.verify_server(&ns, &nc, &wrong.server_proof(&ns, &nc)));
        assert_ne!(server.cookie(&ns, &nc), wrong.cookie(&ns, &nc));

        // A proof is bound to its nonces and to its direction: no replay, no reflection.
        let other = Nonce::random().unwrap();
        let proof = client.client_proof(&ns, &nc);
        assert!(!server.verify_client(&other, &nc, &proof));
        assert!(!server.verify_client(&ns, &other, &proof));
        assert!(!client.verify_server(&ns, &nc, &proof));
        assert!(!server.verify_client(&ns, &nc, &server.server_proof(&ns, &nc)));

        // Garbage proofs are just wrong.
        for junk in ["", "zz", "00", &"0".repeat(64), &"ab".repeat(300)] {
            assert!(!server.verify_client(&ns, &nc, junk), "{junk}");
        }
    }

    #[test]
    fn the_key_is_never_on_the_wire() {
        let psk = Psk::new(KEY).unwrap();
        let (ns, nc) = (Nonce::random().unwrap(), Nonce::random().unwrap());
        let mut wire = Vec::new();
        write_frame(
            &mut wire,
            &ClientMessage::Hello {
                magic: "wirebench".into(),
                protocol: 1,
                version: "x".into(),
                nonce: Some(nc.to_hex()),
            },
        )
        .unwrap();
        write_frame(&mut wire, &ServerMessage::Challenge { nonce: ns.to_hex() }).unwrap();
        write_frame(
            &mut wire,
            &ClientMessage::Auth {
                proof: psk.client_proof(&ns, &nc),
            },
        )
        .unwrap();
        wire.extend_from_slice(psk.server_proof(&ns, &nc).as_bytes());
        assert!(!contains(&wire, KEY));
        assert!(!contains(&wire, to_hex(KEY).as_bytes()));
        // Nor any 8 bytes of it, raw or hex.
        for part in KEY.windows(8) {
            assert!(!contains(&wire, part));
            assert!(!contains(&wire, to_hex(part).as_bytes()));
        }
        // Nor the cookie the data connections will present.
        let cookie = psk.cookie(&ns, &nc);
        assert!(!contains(&wire, cookie.to_hex().as_bytes()));
        assert!(!contains(&wire, &cookie.0));
        // And the key does not print.
        assert_eq!(format!("{psk:?}"), "Psk(..)");
    }

    #[test]
    fn short_keys_are_refused_and_line_ends_trimmed() {
        let e = Psk::new(b"short").unwrap_err().to_string();
        assert!(e.contains("at least 16"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, [KEY, b"\n"].concat()).unwrap();
        let from_file = Psk::from_file(&path).unwrap();
        let direct = Psk::new(KEY).unwrap();
        let (ns, nc) = (Nonce::random().unwrap(), Nonce::random().unwrap());
        assert!(direct.verify_client(&ns, &nc, &from_file.client_proof(&ns, &nc)));
        std::fs::write(&path, vec![b'k'; 5000]).unwrap();
        assert!(Psk::from_file(&path).is_err());
        assert!(Psk::from_file(&dir.path().join("absent")).is_err());
    }

    #[test]
    fn nonces_round_trip_and_reject_junk() {
        let n = Nonce::random().unwrap();
        assert_eq!(Nonce::from_hex(&n.to_hex()), Some(n.clone()));
        assert_ne!(Nonce::random().unwrap(), n);
        for junk in ["", "00", "zz", &"0".repeat(63), &"0".repeat(66)] {
            assert!(Nonce::from_hex(junk).is_none(), "{junk}");
        }
    }
}
