"""Run attachments: images, documents, text files and audio sent with a user message.

``robot.run("What is in this picture?", attachments=["photo.jpg"])`` (RobotLab's ``run(message, with: ...)``):
each attachment is a path (``str`` or :class:`~pathlib.Path`), an ``http(s)`` URL, a ``data:`` URL, or an
:class:`Attachment` (bytes with a MIME type). The user message then goes to the model as OpenAI-style content
parts, which litellm translates for every provider:

* an image (``image/*``): an ``image_url`` part, a URL as it is, bytes as a ``data:`` URL (base64);
* a PDF or another document (``application/*``): a ``file`` part (``file_data`` as a ``data:`` URL, ``filename``);
* a text file (``text/*``, JSON, XML, YAML): inlined as a text part ``<file name='...' mime_type='...'>...</file>``
  (the name HTML-escaped, so a ``'`` or a tag in it cannot end the wrapper);
* audio (WAV or MP3): an ``input_audio`` part.

Only images may be URLs (the model's provider fetches them); download other files and pass their bytes.
Anything else raises :class:`~robotlab.errors.AttachmentError`, naming the attachment and the fix, before
any request is sent. The message with its parts is kept in the robot's history (plain JSON), so later
turns still see the attachment.
"""

from __future__ import annotations

import base64
import binascii
import html
import mimetypes
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from .errors import AttachmentError

__all__ = ["Attachment", "coerce_attachments", "content_chars", "content_parts"]

#: MIME types by file extension that :mod:`mimetypes` may not know on every system.
_EXTRA_TYPES = {".webp": "image/webp", ".md": "text/markdown", ".markdown": "text/markdown", ".yaml": "text/yaml",
                ".yml": "text/yaml", ".csv": "text/csv", ".json": "application/json", ".heic": "image/heic"}
#: ``application/*`` types sent as text rather than as a file.
_TEXT_APPLICATIONS = frozenset({"application/json", "application/xml", "application/yaml", "application/x-yaml",
                                "application/javascript", "application/x-sh", "application/sql", "application/toml"})
#: The ``input_audio`` format of each audio MIME type models take.
_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/wave": "wav", "audio/vnd.wave": "wav",
                  "audio/mpeg": "mp3", "audio/mp3": "mp3"}
_MIME = re.compile(r"^[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*$")
#: The characters one image is counted as when estimating a history's size (about 1,000 tokens).
IMAGE_CHARS = 4_000


def guess_mime_type(name: str) -> str | None:
    """The MIME type of a file or URL path by its extension, or ``None`` when unknown."""
    suffix = Path(name).suffix.lower()
    return _EXTRA_TYPES.get(suffix) or mimetypes.guess_type(f"x{suffix}")[0] if suffix else None


@dataclass(frozen=True, repr=False)
class Attachment:
    """One file sent with a run's message: bytes with a MIME type, or a URL.

    ``Attachment(data=png_bytes, mime_type="image/png")``, ``Attachment(url="https://example.com/cat.jpg")``,
    ``Attachment.from_path("report.pdf")``. Give exactly one of ``data`` and ``url``; a URL's MIME type is
    guessed from its path when not given.

    Args:
        data: The file's content.
        mime_type: Its MIME type (``"image/png"``, ``"application/pdf"``, ``"text/plain"``, ``"audio/wav"``).
        url: An ``http(s)`` URL of an image, which the model's provider fetches.
        name: A file name, sent with documents and text files and used in error messages.

    Raises:
        AttachmentError: both or neither of ``data`` and ``url``, a missing or malformed MIME type, or a kind
            models do not take (video, an archive...; a URL of anything but an image).
    """

    data: bytes | None = None
    mime_type: str | None = None
    url: str | None = None
    name: str | None = None
    kind: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        label = self.label
        if (self.data is None) == (self.url is None):
            raise AttachmentError(f"Attachment {label}: give exactly one of data= (bytes) and url=",
                                  attachment=self.ident)
        if self.data is not None and not isinstance(self.data, bytes | bytearray | memoryview):
            raise AttachmentError(f"Attachment {label}: data= must be bytes, not {type(self.data).__name__}",
                                  attachment=self.ident)
        if self.data is not None and not isinstance(self.data, bytes):
            object.__setattr__(self, "data", bytes(self.data))
        mime = self.mime_type
        if mime is None and self.url is not None:
            mime = guess_mime_type(unquote(urlsplit(self.url).path))
        if mime is None:
            source = "url=..." if self.url is not None else "data=..."
            raise AttachmentError(f"Attachment {label}: unknown MIME type; pass robotlab.Attachment({source}, "
                                  "mime_type='image/png') with the file's real type", attachment=self.ident)
        mime = mime.split(";")[0].strip().lower()
        if not _MIME.match(mime):
            raise AttachmentError(f"Attachment {label}: {self.mime_type!r} is not a MIME type such as 'image/png'",
                                  attachment=self.ident)
        object.__setattr__(self, "mime_type", mime)
        object.__setattr__(self, "kind", _kind(mime, label, self.ident))
        if self.url is not None and self.kind != "image":
            raise AttachmentError(
                f"Attachment {label}: only images can be sent as URLs ({mime} is not one); download the file "
                "and attach its path or bytes", attachment=self.ident)
        if self.kind == "text" and self.data is not None:
            try:
                self.data.decode("utf-8")
            except UnicodeDecodeError:
                raise AttachmentError(f"Attachment {label}: {mime} content is not UTF-8 text; pass its real "
                                      "mime_type", attachment=self.ident) from None

    @property
    def ident(self) -> str:
        """What names the attachment: its name, else its URL, else its size and type (``"<1024 bytes of ...>"``)."""
        if self.name:
            return self.name
        if self.url is not None:
            return self.url if len(self.url) < 80 else f"{self.url[:77]}..."
        return f"<{len(self.data or b'')} bytes of {self.mime_type or 'unknown type'}>"

    @property
    def label(self) -> str:
        """:attr:`ident` as error messages show it (a name or URL quoted)."""
        return repr(self.ident) if self.name or self.url is not None else self.ident

    @property
    def size(self) -> int:
        """The content's size in bytes (``0`` for a URL)."""
        return len(self.data or b"")

    def __repr__(self) -> str:
        source = f"url={self.url!r}" if self.url is not None else f"data=<{self.size} bytes>"
        return f"Attachment({source}, mime_type={self.mime_type!r}, name={self.name!r})"

    @classmethod
    def from_path(cls, path: str | Path, *, mime_type: str | None = None) -> Attachment:
        """The file at ``path``, its MIME type guessed from its extension unless given.

        Raises:
            AttachmentError: no such file, or it cannot be read.
        """
        file = Path(path).expanduser()
        mime = mime_type or guess_mime_type(file.name)
        if mime is None:
            raise AttachmentError(
                f"Attachment '{path}': unknown MIME type for this extension; pass "
                f"robotlab.Attachment.from_path({str(path)!r}, mime_type='...')", attachment=str(path))
        try:
            data = file.read_bytes()
        except FileNotFoundError:
            raise AttachmentError(f"Attachment '{path}': no such file ({file.resolve()}); check the path",
                                  attachment=str(path)) from None
        except OSError as exc:
            raise AttachmentError(f"Attachment '{path}': cannot be read: {exc}", attachment=str(path)) from None
        return cls(data=data, mime_type=mime, name=file.name)

    @classmethod
    def from_data_url(cls, url: str, *, name: str | None = None) -> Attachment:
        """The content of a ``data:<mime>;base64,<data>`` URL.

        Raises:
            AttachmentError: the URL is not base64 ``data:`` URL.
        """
        header, _, payload = url.partition(",")
        if not header.startswith("data:") or not header.endswith(";base64") or not payload:
            raise AttachmentError(f"Attachment {name or 'data: URL'}: only base64 data: URLs "
                                  "('data:image/png;base64,...') are taken", attachment=name or url[:40])
        return cls(data=_b64decode(payload, name or "data: URL"), mime_type=header[5:-7] or None, name=name)

    @classmethod
    def coerce(cls, item: object) -> Attachment:
        """``item`` as an Attachment: an Attachment, a path, an ``http(s)`` or ``data:`` URL, or a :meth:`to_dict`.

        Raises:
            AttachmentError: ``item`` is none of these (bytes need a MIME type: wrap them in an Attachment).
        """
        if isinstance(item, Attachment):
            return item
        if isinstance(item, Path):
            return cls.from_path(item)
        if isinstance(item, str):
            if item.startswith(("http://", "https://")):
                return cls(url=item)
            if item.startswith("data:"):
                return cls.from_data_url(item)
            return cls.from_path(item)
        if isinstance(item, Mapping):
            return cls.from_dict(item)
        if isinstance(item, bytes | bytearray):
            raise AttachmentError(
                f"Attachment <{len(item)} bytes>: bytes need a MIME type; pass "
                "robotlab.Attachment(data=..., mime_type='image/png')", attachment=f"<{len(item)} bytes>")
        raise AttachmentError(f"Attachment {item!r}: expected a path, a URL or a robotlab.Attachment, "
                              f"not {type(item).__name__}", attachment=repr(item)[:80])

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form: ``{"mime_type", "name"?, "data" (base64) | "url"}``; :meth:`from_dict` reads it."""
        out: dict[str, Any] = {"mime_type": self.mime_type}
        if self.name:
            out["name"] = self.name
        if self.url is not None:
            out["url"] = self.url
        else:
            out["data"] = base64.b64encode(self.data or b"").decode("ascii")
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Attachment:
        """An Attachment from :meth:`to_dict` output (``data`` base64).

        Raises:
            AttachmentError: neither ``data`` nor ``url``, or ``data`` is not base64.
        """
        name = data.get("name")
        label = str(name or data.get("url") or "dict")
        encoded = data.get("data")
        content = None if encoded is None else _b64decode(str(encoded), label)
        return cls(data=content, mime_type=data.get("mime_type"), url=data.get("url"), name=name)

    def content_part(self) -> dict[str, Any]:
        """The OpenAI-style content part that carries this attachment (see the module's docs)."""
        if self.kind == "image":
            return {"type": "image_url", "image_url": {"url": self.url or self._data_url()}}
        if self.kind == "audio":
            encoded = base64.b64encode(self.data or b"").decode("ascii")
            return {"type": "input_audio",
                    "input_audio": {"data": encoded, "format": _AUDIO_FORMATS[str(self.mime_type)]}}
        if self.kind == "text":
            text = (self.data or b"").decode("utf-8")
            name = html.escape(self.name or "attachment", quote=True)  # a quote or a tag in a name ends nothing
            return {"type": "text", "text": f"<file name='{name}' mime_type='{self.mime_type}'>{text}</file>"}
        return {"type": "file", "file": {"file_data": self._data_url(), "filename": self.name or "attachment"}}

    def _data_url(self) -> str:
        return f"data:{self.mime_type};base64,{base64.b64encode(self.data or b'').decode('ascii')}"


def _b64decode(payload: str, label: str) -> bytes:
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise AttachmentError(f"Attachment {label}: its data is not valid base64", attachment=label) from None


def _kind(mime: str, label: str, ident: str) -> str:
    """``"image"``, ``"audio"``, ``"text"`` or ``"file"``; a type models do not take raises AttachmentError."""
    major = mime.split("/")[0]
    if major == "image":
        return "image"
    if major == "text" or mime in _TEXT_APPLICATIONS or mime.endswith(("+json", "+xml")):
        return "text"
    if mime in _AUDIO_FORMATS:
        return "audio"
    if major == "application" and mime not in ("application/octet-stream", "application/zip"):
        return "file"
    raise AttachmentError(
        f"Attachment {label}: {mime} cannot be sent to a model; attach images, PDFs or other documents, "
        "text files, or WAV/MP3 audio", attachment=ident)


def coerce_attachments(items: object) -> list[Attachment]:
    """``items`` (one attachment or an iterable of them; ``None`` for none) as :class:`Attachment` objects.

    Raises:
        AttachmentError: an item is not an attachment (see :meth:`Attachment.coerce`).
    """
    if items is None:
        return []
    if isinstance(items, Attachment | str | Path | Mapping | bytes | bytearray):
        return [Attachment.coerce(items)]
    if not isinstance(items, Iterable):
        return [Attachment.coerce(items)]
    return [Attachment.coerce(item) for item in items]


def content_parts(text: str | None, attachments: Iterable[Attachment]) -> list[dict[str, Any]]:
    """The content parts of a user message: its text (when there is any), then each attachment's part."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    return [*parts, *(attachment.content_part() for attachment in attachments)]


def content_chars(content: object) -> int:
    """The characters ``content`` counts for when estimating a history's size.

    A string's length; for content parts, the text parts' length and :data:`IMAGE_CHARS` per other part
    (not its base64 size).
    """
    if content is None:
        return 0
    if isinstance(content, list):
        return sum(len(str(part.get("text") or "")) if isinstance(part, dict) and part.get("type") == "text"
                   else IMAGE_CHARS for part in content)
    return len(str(content))
