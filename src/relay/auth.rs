//! The UDP leg's cryptography: the tag every datagram of a session carries, the acceptor's
//! stateless cookie, and the session key both relays derive. No state and no I/O: the
//! handshake that uses them is [`super::link`]'s.
//!
//! ```text
//! opener (A)                                      acceptor (B)
//! INIT { Na, padding }                     ->     (no state: answers with a cookie only,
//!                                                  never more bytes than the INIT had)
//!                                          <-     COOKIE { Na, C = HMAC(Sb, slot | A's addr | Na) }
//! ECHO { Na, C, proof }                    ->     C checked (this slot or the one before):
//!                                                  A receives at its address. With a key,
//!                                                  proof = HMAC(K', "opener" | Na | C) too.
//!                                          <-     ACCEPT { Na, Nb } tagged with the session key
//! ```
//!
//! The session key is HMAC(K, label | Na | Nb | C) with the pre-shared key K when the relays
//! have one (`--psk-file`), else SHA-256(label | Na | Nb | C): every part of it crossed the
//! wire, so it proves only that the opener receives at its address (what stops spoofed and
//! strange-port datagrams), not who it is. Every datagram of a session carries the first
//! [`TAG`] bytes of HMAC-SHA256(session key, everything before the tag).

use std::net::SocketAddr;

use ring::{digest, hmac};

use crate::control::auth::Psk;

/// Bytes of the tag that ends every datagram of a session.
pub const TAG: usize = 16;
/// Bytes of a nonce and of a cookie.
pub const NONCE: usize = 16;

const COOKIE_LABEL: &[u8] = b"wirebench relay leg 2: cookie";
const NONCE_LABEL: &[u8] = b"wirebench relay leg 2: nonce";
const SESSION_LABEL: &[u8] = b"wirebench relay leg 2: session key";
const PROOF_LABEL: &[u8] = b"wirebench relay leg 2: opener proof";

pub type Nonce = [u8; NONCE];

/// Compares in constant time: how much of a tag was right must not show in the time taken.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn first16(t: &[u8]) -> [u8; NONCE] {
    let mut out = [0u8; NONCE];
    out.copy_from_slice(&t[..NONCE]);
    out
}

/// A session key: tags datagrams and checks them.
pub struct SessionKey(hmac::Key);

impl SessionKey {
    /// Derives the key of the session named by the two nonces and the cookie.
    pub fn derive(psk: Option<&Psk>, na: &Nonce, nb: &Nonce, cookie: &Nonce) -> SessionKey {
        let mut data = Vec::with_capacity(3 * NONCE);
        data.extend_from_slice(na);
        data.extend_from_slice(nb);
        data.extend_from_slice(cookie);
        let material: Vec<u8> = match psk {
            Some(k) => k.derive(SESSION_LABEL, &data).to_vec(),
            None => {
                let mut ctx = digest::Context::new(&digest::SHA256);
                ctx.update(SESSION_LABEL);
                ctx.update(&data);
                ctx.finish().as_ref().to_vec()
            }
        };
        SessionKey(hmac::Key::new(hmac::HMAC_SHA256, &material))
    }

    /// Appends the tag of `d` to it.
    pub fn seal(&self, d: &mut Vec<u8>) {
        let t = hmac::sign(&self.0, d);
        d.extend_from_slice(&t.as_ref()[..TAG]);
    }

    /// `d` without its tag if the tag is right.
    pub fn open<'a>(&self, d: &'a [u8]) -> Option<&'a [u8]> {
        let body_len = d.len().checked_sub(TAG)?;
        let (body, tag) = d.split_at(body_len);
        let t = hmac::sign(&self.0, body);
        same(&t.as_ref()[..TAG], tag).then_some(body)
    }
}

/// A relay's own random secret: its cookies (acceptor) and its nonces (both).
pub struct Secret(hmac::Key);

impl Secret {
    pub fn new(bytes: &[u8; 32]) -> Secret {
        Secret(hmac::Key::new(hmac::HMAC_SHA256, bytes))
    }

    fn mac(&self, label: &[u8], parts: &[&[u8]]) -> [u8; NONCE] {
        let mut ctx = hmac::Context::with_key(&self.0);
        ctx.update(label);
        for p in parts {
            ctx.update(&(p.len() as u32).to_be_bytes());
            ctx.update(p);
        }
        first16(ctx.sign().as_ref())
    }

    /// The cookie of an INIT from `from` in time slot `slot`: only who receives at `from`
    /// learns it, and the acceptor keeps nothing to check it later.
    pub fn cookie(&self, slot: u64, from: SocketAddr, na: &Nonce) -> Nonce {
        let ip = match from.ip().to_canonical() {
            std::net::IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
            std::net::IpAddr::V6(v6) => v6.octets(),
        };
        self.mac(
            COOKIE_LABEL,
            &[&slot.to_be_bytes(), &ip, &from.port().to_be_bytes(), na],
        )
    }

    /// Whether `cookie` was made for `from` and `na` in this slot or the one before.
    pub fn check_cookie(&self, slot: u64, from: SocketAddr, na: &Nonce, cookie: &Nonce) -> bool {
        let now = same(&self.cookie(slot, from, na), cookie);
        let before = slot > 0 && same(&self.cookie(slot - 1, from, na), cookie);
        now | before
    }

    /// A nonce that nobody without the secret can foresee, the same for the same inputs (an
    /// ECHO sent again makes the same session, not a second one).
    pub fn nonce(&self, parts: &[&[u8]]) -> Nonce {
        self.mac(NONCE_LABEL, parts)
    }
}

/// The opener's proof that it holds the pre-shared key, in its ECHO.
pub fn proof(psk: &Psk, na: &Nonce, cookie: &Nonce) -> Nonce {
    let mut data = Vec::with_capacity(2 * NONCE);
    data.extend_from_slice(na);
    data.extend_from_slice(cookie);
    first16(&psk.derive(PROOF_LABEL, &data))
}

pub fn check_proof(psk: &Psk, na: &Nonce, cookie: &Nonce, got: &[u8]) -> bool {
    same(&proof(psk, na, cookie), got)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_sealed_datagram_opens_and_any_change_to_it_does_not() {
        let (na, nb, c) = ([1u8; 16], [2u8; 16], [3u8; 16]);
        let k = SessionKey::derive(None, &na, &nb, &c);
        let mut d = b"header and payload".to_vec();
        k.seal(&mut d);
        assert_eq!(d.len(), 18 + TAG);
        assert_eq!(k.open(&d), Some(&b"header and payload"[..]));
        for i in 0..d.len() {
            let mut bad = d.clone();
            bad[i] ^= 0x40;
            assert_eq!(k.open(&bad), None, "byte {i} changed");
        }
        assert_eq!(k.open(&d[..d.len() - 1]), None);
        assert_eq!(k.open(&d[..3]), None);
        // Another session's key, or the same nonces under a key, do not open it.
        let other = SessionKey::derive(None, &na, &[9u8; 16], &c);
        assert_eq!(other.open(&d), None);
        let psk = Psk::new(b"0123456789abcdef0123").unwrap();
        let keyed = SessionKey::derive(Some(&psk), &na, &nb, &c);
        assert_eq!(keyed.open(&d), None);
    }

    #[test]
    fn a_cookie_holds_for_its_address_and_two_slots_only() {
        let s = Secret::new(&[7u8; 32]);
        let na = [5u8; 16];
        let a = addr("127.0.0.1:4000");
        let c = s.cookie(10, a, &na);
        assert!(s.check_cookie(10, a, &na, &c));
        assert!(s.check_cookie(11, a, &na, &c));
        assert!(!s.check_cookie(12, a, &na, &c), "expired");
        assert!(
            !s.check_cookie(10, addr("127.0.0.1:4001"), &na, &c),
            "other port"
        );
        assert!(
            !s.check_cookie(10, addr("127.0.0.2:4000"), &na, &c),
            "other host"
        );
        assert!(!s.check_cookie(10, a, &[6u8; 16], &c), "other nonce");
        // An IPv4 address and its mapped IPv6 form are one address.
        assert!(s.check_cookie(10, addr("[::ffff:127.0.0.1]:4000"), &na, &c));
        // Another relay's secret makes other cookies.
        assert!(!Secret::new(&[8u8; 32]).check_cookie(10, a, &na, &c));
    }

    #[test]
    fn the_proof_needs_the_key() {
        let k1 = Psk::new(b"0123456789abcdef0123").unwrap();
        let k2 = Psk::new(b"0123456789abcdef0124").unwrap();
        let (na, c) = ([1u8; 16], [2u8; 16]);
        let p = proof(&k1, &na, &c);
        assert!(check_proof(&k1, &na, &c, &p));
        assert!(!check_proof(&k2, &na, &c, &p));
        assert!(!check_proof(&k1, &[0u8; 16], &c, &p));
        assert!(!check_proof(&k1, &na, &c, &p[..15]));
    }
}
