"""Keys: the table's own signing key, and the public keys it or an auditor trusts (Ed25519).

Ed25519 from the ``cryptography`` package. Two uses:

* the **table key** (one per table, never shared between tables): signs the
  journal's checkpoints and the table's MQTT messages, and seals card faces
  in the journal until the reveal (an AEAD key derived from it with HKDF,
  :meth:`TableKey.derive`). It lives in systemd credentials
  (``LoadCredentialEncrypted=threecard-table-key:...``, which a TPM can seal;
  the service reads ``$CREDENTIALS_DIRECTORY/threecard-table-key``) or in a
  PEM file that only its owner may read (mode 0600). ``tablectl audit keygen``
  makes one; its public half (``FILE.pub``) goes to the auditors and the floor.
* a **vendor signing key** (``tablectl firmware keygen``): signs firmware
  images; tables hold only its public half.

A key is named by its **key id**: the first 16 hex digits of the SHA-256 of
the raw 32-byte public key. Rotation: a new table key gets a new key id; the
journal records the key id of every checkpoint, and an auditor keeps every
public key the table ever used (``docs/journal.md``).
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .files import UnsafeFile, read_regular, write_atomic

#: the systemd credential holding the table key (``LoadCredentialEncrypted=``)
CREDENTIAL_NAME = "threecard-table-key"


class KeyFileError(ValueError):
    """A key file is missing, unreadable, not an Ed25519 key, or readable by others.
    The message names the file and what to do."""


def key_id(public: Ed25519PublicKey) -> str:
    """The key id: the first 16 hex digits of SHA-256 over the raw 32-byte public key."""
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def public_pem(public: Ed25519PublicKey) -> bytes:
    """The public key as PEM (SubjectPublicKeyInfo)."""
    return public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


try:  # libsodium (PyNaCl, the ``mqtt`` and ``floor`` extras): the same Ed25519 check in half the CPU
    from nacl.exceptions import BadSignatureError as _BadSignature
    from nacl.exceptions import CryptoError as _CryptoError
    from nacl.signing import VerifyKey as _VerifyKey
except ImportError:  # pragma: no cover - without the extra the cryptography package checks alone
    _VerifyKey = None

_SODIUM_KEYS: dict[int, tuple[Ed25519PublicKey, object]] = {}


def _sodium_key(public: Ed25519PublicKey) -> object:
    """libsodium's verify key of ``public``, remembered per key object (bounded)."""
    got = _SODIUM_KEYS.get(id(public))
    if got is not None and got[0] is public:
        return got[1]
    if len(_SODIUM_KEYS) >= 4096:
        _SODIUM_KEYS.clear()
    vk = _VerifyKey(public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw))
    _SODIUM_KEYS[id(public)] = (public, vk)  # the object is kept: its id is not reused while cached
    return vk


def verify_signature(public: Ed25519PublicKey, signature: bytes, data: bytes) -> bool:
    """True when ``signature`` (64 bytes) is ``public``'s signature of ``data`` (Ed25519,
    RFC 8032 section 5.1.7).

    With PyNaCl installed the check is libsodium's ``crypto_sign_verify_detached``
    (measured 70 us a check here against 137 us for the ``cryptography`` package's
    OpenSSL: the floor checks every table message, ``bench/floor_ingest.py``); both
    accept exactly the signatures a genuine key makes (libsodium also refuses
    non-canonical and small-order encodings, which no genuine signer produces);
    ``tests/test_floor_verify.py`` checks that they agree. Without PyNaCl, the
    ``cryptography`` package checks."""
    if _VerifyKey is not None:
        try:
            _sodium_key(public).verify(data, signature)  # type: ignore[attr-defined]
        except (_BadSignature, _CryptoError, ValueError, TypeError):
            return False
        return True
    try:
        public.verify(signature, data)
    except (InvalidSignature, ValueError):
        return False
    return True


@dataclass(frozen=True)
class TableKey:
    """An Ed25519 private key and where it came from (``source``: a path or
    ``credential:NAME``)."""

    private: Ed25519PrivateKey
    source: str = ""

    @functools.cached_property
    def public(self) -> Ed25519PublicKey:
        """The public half (one object a key: libsodium's verify key is remembered per object)."""
        return self.private.public_key()

    @functools.cached_property
    def key_id(self) -> str:
        return key_id(self.public)

    def sign(self, data: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``data``."""
        return self.private.sign(data)

    def derive(self, purpose: str, context: bytes = b"", length: int = 32) -> bytes:
        """A secret key for ``purpose`` (e.g. ``"journal-seal/1"``) and ``context`` (e.g. a
        round id), derived with HKDF-SHA256 from the private key (RFC 5869). Keys
        for different contexts are independent: disclosing one (a round's seal key
        at the reveal) discloses nothing of the private key or another round's."""
        raw = self.private.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                         serialization.NoEncryption())
        return HKDF(hashes.SHA256(), length, salt=None,
                    info=purpose.encode() + b"\x00" + context).derive(raw)

    def private_pem(self) -> bytes:
        return self.private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption())


def generate() -> TableKey:
    """A new random Ed25519 key (the operating system's CSPRNG)."""
    return TableKey(Ed25519PrivateKey.generate(), "new")


def save(key: TableKey, path: str | Path, *, overwrite: bool = False) -> tuple[Path, Path]:
    """Write ``key`` to ``path`` (PEM, mode 0600) and its public half to ``path.pub`` (0644).
    Refuses (``FileExistsError``) to replace an existing key unless ``overwrite``.
    Returns (private path, public path)."""
    p = Path(path)
    pub = p.with_name(p.name + ".pub")
    if p.exists() and not overwrite:
        raise FileExistsError(f"{p} already exists; a table key is replaced only on purpose (rotation)")
    write_atomic(p, key.private_pem(), mode=0o600)
    write_atomic(pub, public_pem(key.public), mode=0o644)
    return p, pub


def _parse_private(data: bytes, where: str) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"{where} is not an unencrypted PEM private key: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"{where} holds a {type(key).__name__}, not an Ed25519 key")
    return key


def load_private_key(path: str | Path, *, check_mode: bool = True) -> TableKey:
    """The private key in the PEM file at ``path``. ``check_mode``: refuse a file that its
    group or other users may read or write (it must be 0600 or 0400). Raises
    :class:`KeyFileError`."""
    p = Path(path)
    try:
        data = read_regular(p, max_bytes=64 * 1024)
        st = os.stat(p)
    except FileNotFoundError:
        raise KeyFileError(f"no key file at {p}; make one with `tablectl audit keygen {p}`") from None
    except (UnsafeFile, OSError) as exc:
        raise KeyFileError(f"cannot read key file {p}: {exc}") from None
    if check_mode and st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise KeyFileError(f"key file {p} may be read by others (mode {stat.S_IMODE(st.st_mode):04o}); "
                           f"chmod 600 {p}")
    return TableKey(_parse_private(data, str(p)), str(p))


def load_table_key(path: str | Path | None = None, *, environ: Mapping[str, str] | None = None) -> TableKey:
    """The table key: from ``path`` when given, else from the systemd credential
    :data:`CREDENTIAL_NAME` in ``$CREDENTIALS_DIRECTORY``. Raises
    :class:`KeyFileError` when neither is there, or the file is unsafe."""
    if path is not None:
        return load_private_key(path)
    env = os.environ if environ is None else environ
    folder = env.get("CREDENTIALS_DIRECTORY")
    if folder:
        cred = Path(folder) / CREDENTIAL_NAME
        if cred.exists():
            key = load_private_key(cred)
            return TableKey(key.private, f"credential:{CREDENTIAL_NAME}")
    raise KeyFileError(f"no table key: give a key file (`tablectl audit keygen FILE` makes one) or the systemd "
                       f"credential {CREDENTIAL_NAME} (LoadCredentialEncrypted=, docs/journal.md)")


def load_public_key(path: str | Path) -> Ed25519PublicKey:
    """A public key from ``path``: PEM (``FILE.pub`` as :func:`save` writes it) or 64 hex
    digits of the raw key. Raises :class:`KeyFileError`."""
    p = Path(path)
    try:
        data = read_regular(p, max_bytes=64 * 1024)
    except FileNotFoundError:
        raise KeyFileError(f"no public key file at {p}") from None
    except (UnsafeFile, OSError) as exc:
        raise KeyFileError(f"cannot read public key file {p}: {exc}") from None
    text = data.strip()
    try:
        if len(text) == 64 and all(c in b"0123456789abcdefABCDEF" for c in text):
            return Ed25519PublicKey.from_public_bytes(bytes.fromhex(text.decode()))
        key = serialization.load_pem_public_key(data)
    except ValueError as exc:
        raise KeyFileError(f"{p} is not a public key (PEM or 64 hex digits): {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(f"{p} holds a {type(key).__name__}, not an Ed25519 public key")
    return key


def table_key_for(journal_path: str | Path, key_file: str | Path | None = None, *, service: bool = False,
                  environ: Mapping[str, str] | None = None) -> tuple[TableKey, bool]:
    """The key a controller writing ``journal_path`` signs and seals with, and whether it
    was made just now: ``key_file`` when given, else the systemd credential; in
    service mode one of those must exist (raises :class:`KeyFileError`). Outside it
    (a bench, a simulation) the key ``JOURNAL.key`` beside the journal is used,
    made (0600) on first use. Raises :class:`KeyFileError`."""
    if key_file is not None:
        return load_private_key(key_file), False
    try:
        return load_table_key(None, environ=environ), False
    except KeyFileError:
        if service:
            raise
    p = Path(journal_path)
    beside = p.with_name(p.name + ".key")
    if beside.exists():
        return load_private_key(beside), False
    key = generate()
    save(key, beside)
    return TableKey(key.private, str(beside)), True
