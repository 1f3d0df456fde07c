# Regenerates hf_layout.safetensors: a safetensors image laid out exactly as
# Hugging Face's writer does (u64 LE header length; compact JSON header with
# __metadata__ first and tensors in descending dtype order, then name; padded
# with spaces to a multiple of 8), built with struct+json only.
import json, struct
tensors = [  # (name, dtype, shape, raw bytes) in HF layout order
  ("ids", "I64", [2], struct.pack("<2q", -1, 151645)),
  ("weight", "F32", [2, 3], struct.pack("<6f", 0, 1, 2, 3, 4, 5)),
  ("bias", "BF16", [3], bytes([0x80, 0x3f, 0x00, 0x40, 0x40, 0xc0])),  # 1.0, 2.0, -3.0
  ("flag", "BOOL", [], bytes([1])),
]
header = {"__metadata__": {"format": "pt"}}
off = 0
for name, dt, shape, raw in tensors:
  header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
  off += len(raw)
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * ((8 - len(h) % 8) % 8)
with open("hf_layout.safetensors", "wb") as f:
  f.write(struct.pack("<Q", len(h)) + h + b"".join(t[3] for t in tensors))
