//! The cryptographic benchmarks: Scrypt with Litecoin's parameters and PBKDF2 as Cisco's
//! type 8 password hash (`vectorvisor.md` §4.1, "Microbenchmarks").

use base64::Engine as _;
use rand::RngExt;

use crate::inputs::{self, Rng};
use crate::{hex, WorkloadError};

/// Bytes of a Litecoin block header.
const HEADER: usize = 80;
/// PBKDF2 iterations of a Cisco type 8 hash.
const TYPE8_ITERATIONS: u32 = 20_000;
/// Characters of a Cisco type 8 salt.
const TYPE8_SALT: usize = 14;

/// A random 80-byte block header (version, previous hash, Merkle root, time, bits, nonce).
pub fn scrypt_request(rng: &mut Rng) -> Vec<u8> {
    let mut header = [0u8; HEADER];
    rng.fill(&mut header[..]);
    header.to_vec()
}

/// Litecoin's proof-of-work hash of a block header: `scrypt(header, header)` with N = 1024,
/// r = 1, p = 1 and a 32-byte output. Replies with the hash in hex and a newline.
pub fn scrypt(request: &[u8]) -> Result<Vec<u8>, WorkloadError> {
    if request.len() != HEADER {
        return Err(WorkloadError::new(format!(
            "a block header is {HEADER} bytes, not {}",
            request.len()
        )));
    }
    let params = scrypt::Params::new(10, 1, 1)
        .map_err(|e| WorkloadError::new(format!("scrypt parameters: {e}")))?;
    let mut out = [0u8; 32];
    scrypt::scrypt(request, request, &params, &mut out)
        .map_err(|e| WorkloadError::new(format!("scrypt: {e}")))?;
    Ok(format!("{}\n", hex(&out)).into_bytes())
}

/// `password\nsalt\n`: a random password and a random 14-character type 8 salt.
pub fn pbkdf2_request(rng: &mut Rng) -> Vec<u8> {
    let password = inputs::password(rng);
    let salt = inputs::salt(rng, TYPE8_SALT);
    format!("{password}\n{salt}\n").into_bytes()
}

/// A Cisco type 8 hash, `$8$SALT$HASH`: PBKDF2-HMAC-SHA256 over 20,000 iterations, the
/// 32-byte key in the crypt base64 alphabet without padding.
pub fn pbkdf2(request: &[u8]) -> Result<Vec<u8>, WorkloadError> {
    let text =
        std::str::from_utf8(request).map_err(|_| WorkloadError::new("the request is not UTF-8"))?;
    let mut lines = text.lines();
    let (Some(password), Some(salt), None) = (lines.next(), lines.next(), lines.next()) else {
        return Err(WorkloadError::new(
            "expected two lines: the password, then the salt",
        ));
    };
    // Every character checked, without an early exit: lanes of a GPU warp checking
    // different salts then take the same path (docs/simt.md).
    let bad = salt
        .bytes()
        .fold(0u32, |n, b| n + u32::from(!inputs::is_crypt_char(b)));
    if salt.len() != TYPE8_SALT || bad != 0 {
        return Err(WorkloadError::new(format!(
            "a type 8 salt is {TYPE8_SALT} characters of ./0-9A-Za-z"
        )));
    }
    let mut key = [0u8; 32];
    pbkdf2::pbkdf2_hmac::<sha2::Sha256>(
        password.as_bytes(),
        salt.as_bytes(),
        TYPE8_ITERATIONS,
        &mut key,
    );
    let encoded = base64::engine::GeneralPurpose::new(
        &base64::alphabet::CRYPT,
        base64::engine::general_purpose::NO_PAD,
    )
    .encode(key);
    Ok(format!("$8${salt}${encoded}\n").into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrypt_matches_the_rfc_7914_vector_shape() {
        // RFC 7914 §12, second vector: P="password", S="NaCl", N=1024, r=8, p=16.
        let params = scrypt::Params::new(10, 8, 16).unwrap();
        let mut out = [0u8; 64];
        scrypt::scrypt(b"password", b"NaCl", &params, &mut out).unwrap();
        assert_eq!(&hex(&out)[..32], "fdbabe1c9d3472007856e7190d01e9fe");
        let reply = scrypt(&[0u8; 80]).unwrap();
        assert_eq!(reply.len(), 65);
        assert!(scrypt(&[0u8; 79]).is_err());
    }

    #[test]
    fn type8_hashes_look_like_ciscos() {
        let reply = String::from_utf8(pbkdf2(b"cisco\nabcdefghijklmn\n").unwrap()).unwrap();
        let parts: Vec<&str> = reply.trim_end().split('$').collect();
        assert_eq!(parts[..3], ["", "8", "abcdefghijklmn"]);
        assert_eq!(parts[3].len(), 43);
        assert!(pbkdf2(b"only-a-password\n").is_err());
        assert!(pbkdf2(b"pw\nshort\n").is_err());
    }
}
