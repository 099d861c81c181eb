#!/usr/bin/env python3
"""Writes JPEG/PNG fixtures and TensorFlow's decodes of them (the parity reference).

Usage: .venv/bin/python scripts/make_codec_fixtures.py [OUT_DIR]   (default fixtures/codec; needs
       tensorflow-cpu==2.21.0, numpy, Pillow: pip install pillow into the same venv)

OUT_DIR/manifest.txt has one case per line:
    <codec> <input file> key=value ... -> <expected .npy | .err | .jpg>
`.npy` holds TF's output, `.err` TF's error message (the decoder must fail too).
Encode cases name the raw pixels (.npy) as input and TF's encoded bytes as output.
"""
import io
import os
import struct
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from PIL import Image  # noqa: E402

from fixture_images import photo  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else "fixtures/codec"
rng = np.random.default_rng(20240601)
lines = []


def save(name, data):
    path = os.path.join(OUT, name)
    if isinstance(data, bytes):
        with open(path, "wb") as f:
            f.write(data)
    else:
        np.save(path, data)
    return name


def tf_call(fn):
    try:
        return fn().numpy(), None
    except (tf.errors.InvalidArgumentError, tf.errors.OpError, ValueError) as e:
        return None, (getattr(e, "message", None) or str(e)).splitlines()[0]


def add_case(codec, src, params, stem, fn):
    out, err = tf_call(fn)
    if err is None:
        name = save(stem + ".npy", out)
    else:
        name = save(stem + ".err", err.encode())
    kv = " ".join(f"{k}={v}" for k, v in params.items())
    lines.append(f"{codec} {src} {kv} -> {name}")


def strip_app14(data):
    """Removes every APP14 (Adobe) segment, so libjpeg sees a plain (non-inverted) CMYK file."""
    out, i = bytearray(data[:2]), 2
    while i < len(data):
        marker = data[i + 1]
        if marker == 0xDA:  # start of scan: copy the rest verbatim
            out += data[i:]
            break
        seglen = struct.unpack(">H", data[i + 2:i + 4])[0]
        if marker != 0xEE:
            out += data[i:i + 2 + seglen]
        i += 2 + seglen
    return bytes(out)


def pil_bytes(img, fmt, **kw):
    b = io.BytesIO()
    img.save(b, fmt, **kw)
    return b.getvalue()


def jpeg_fixtures():
    H, W = 29, 37
    px = photo(H, W, 1)
    big = photo(61, 83, 2)
    files = {
        "baseline420.jpg": tf.io.encode_jpeg(px, quality=90).numpy(),
        "baseline444.jpg": tf.io.encode_jpeg(px, quality=90, chroma_downsampling=False).numpy(),
        "pil422.jpg": pil_bytes(Image.fromarray(px), "JPEG", quality=85, subsampling=1),
        "progressive420.jpg": tf.io.encode_jpeg(px, quality=80, progressive=True).numpy(),
        "pil_progressive444.jpg": pil_bytes(Image.fromarray(px), "JPEG", quality=92, subsampling=0,
                                            progressive=True),
        "optimized420.jpg": tf.io.encode_jpeg(px, quality=60, optimize_size=True).numpy(),
        "gray.jpg": tf.io.encode_jpeg(px[..., :1], quality=90).numpy(),
        "big420.jpg": tf.io.encode_jpeg(big, quality=75).numpy(),
        "big_restart420.jpg": pil_bytes(Image.fromarray(big), "JPEG", quality=75, subsampling=2,
                                        restart_marker_blocks=3),
        "cmyk_adobe.jpg": pil_bytes(Image.fromarray(px).convert("CMYK"), "JPEG", quality=90),
    }
    files["cmyk_plain.jpg"] = strip_app14(files["cmyk_adobe.jpg"])
    # Photo-like CMYK with a real black channel (PIL's RGB->CMYK sets K=0).
    k = (255 - px.max(axis=2)).astype(np.uint8)
    cmyk = np.dstack([255 - px[..., 0], 255 - px[..., 1] // 2, 255 - px[..., 2], k]).astype(np.uint8)
    files["cmyk_k_adobe.jpg"] = pil_bytes(Image.fromarray(cmyk, "CMYK"), "JPEG", quality=88)
    b = files["baseline420.jpg"]
    files["truncated420.jpg"] = b[: len(b) * 2 // 3]
    files["no_eoi420.jpg"] = b[:-2]
    for name, data in files.items():
        save("jpeg_" + name, bytes(data))
    # Speed benchmark input (as crates/codec/examples/decode_bench.rs reads): 500x375 4:2:0, quality 90.
    save("bench_500x375.jpg", tf.io.encode_jpeg(photo(375, 500, 4), quality=90).numpy())

    for name in files:
        src = "jpeg_" + name
        stem = src[:-4]
        data = tf.constant(bytes(files[name]))
        for ch in (0, 1, 3):
            for ratio in (1, 2, 4, 8):
                add_case("jpeg", src, dict(channels=ch, ratio=ratio), f"{stem}__c{ch}_r{ratio}",
                         lambda: tf.io.decode_jpeg(data, channels=ch, ratio=ratio))
        for ch in (0, 1, 3):
            for ratio in (1, 2):
                add_case("jpeg", src, dict(channels=ch, ratio=ratio, fancy=0), f"{stem}__c{ch}_r{ratio}_nofancy",
                         lambda: tf.io.decode_jpeg(data, channels=ch, ratio=ratio, fancy_upscaling=False))
            add_case("jpeg", src, dict(channels=ch, dct="INTEGER_ACCURATE"), f"{stem}__c{ch}_accurate",
                     lambda: tf.io.decode_jpeg(data, channels=ch, dct_method="INTEGER_ACCURATE"))
        add_case("jpeg", src, dict(recover=1), f"{stem}__recover",
                 lambda: tf.io.decode_jpeg(data, try_recover_truncated=True))
        add_case("jpeg", src, dict(recover=1, fraction=0.5), f"{stem}__recover_half",
                 lambda: tf.io.decode_jpeg(data, try_recover_truncated=True, acceptable_fraction=0.5))
        add_case("jpeg_shape", src, {}, f"{stem}__shape", lambda: tf.io.extract_jpeg_shape(data))

    # Encoder: raw pixels in, TF's bytes out (compared byte for byte, and decoded by TF).
    gray = px[..., :1]
    enc = [
        ("rgb_q95", px, {}),
        ("rgb_q50", px, dict(quality=50)),
        ("rgb_q90_444", px, dict(quality=90, chroma_downsampling=False)),
        ("rgb_progressive", px, dict(progressive=True)),
        ("rgb_optimize", px, dict(optimize_size=True)),
        ("rgb_cm_72", px, dict(density_unit="cm", x_density=72, y_density=96)),
        ("rgb_xmp", px, dict(xmp_metadata="<x:xmpmeta>ferroflow</x:xmpmeta>")),
        ("gray_q95", gray, {}),
        ("gray_fmt", gray, dict(format="grayscale", quality=70)),
        ("big_q75", big, dict(quality=75)),
    ]
    for name, img, kw in enc:
        src = save(f"enc_{name}__in.npy", img)
        params = {k: ("1" if v is True else "0" if v is False else str(v).replace(" ", "_"))
                  for k, v in kw.items()}
        out = tf.io.encode_jpeg(img, **kw).numpy()
        params_s = " ".join(f"{k}={v}" for k, v in params.items())
        lines.append(f"jpeg_encode {src} {params_s} -> {save(f'enc_{name}__tf.jpg', out)}")


def png_fixtures():
    H, W = 29, 37
    px = photo(H, W, 3)
    alpha = np.clip(np.linspace(0, 255, W)[None, :] + rng.normal(0, 30, (H, W)), 0, 255).astype(np.uint8)
    px16 = (px.astype(np.uint16) * 257 + rng.integers(0, 257, px.shape)).astype(np.uint16)
    a16 = (alpha.astype(np.uint16) * 257 + rng.integers(0, 257, alpha.shape)).astype(np.uint16)
    gray = px[..., 1:2]
    gray16 = px16[..., 1:2]
    files = {
        "gray8.png": tf.io.encode_png(gray).numpy(),
        "gray16.png": tf.io.encode_png(gray16).numpy(),
        "graya8.png": tf.io.encode_png(np.dstack([gray, alpha])).numpy(),
        "graya16.png": tf.io.encode_png(np.dstack([gray16, a16])).numpy(),
        "rgb8.png": tf.io.encode_png(px, compression=9).numpy(),
        "rgb16.png": tf.io.encode_png(px16).numpy(),
        "rgba8.png": tf.io.encode_png(np.dstack([px, alpha])).numpy(),
        "rgba16.png": tf.io.encode_png(np.dstack([px16, a16])).numpy(),
    }
    pil_img = Image.fromarray(px)
    pal = pil_img.quantize(colors=200)
    files["palette8.png"] = pil_bytes(pal, "PNG")
    pal_t = pal.copy()
    pal_t.info["transparency"] = bytes([(i * 37) % 256 for i in range(200)])
    files["palette8_trns.png"] = pil_bytes(pal_t, "PNG")
    files["palette4.png"] = pil_bytes(pil_img.quantize(colors=16), "PNG", bits=4)
    pal4_t = pil_img.quantize(colors=16)
    files["palette4_trns.png"] = pil_bytes(pal4_t, "PNG", bits=4, transparency=3)
    files["gray1.png"] = pil_bytes(Image.fromarray(gray[..., 0]).convert("1"), "PNG")
    files["gray8_trns.png"] = pil_bytes(Image.fromarray(gray[..., 0]), "PNG", transparency=int(gray[5, 5, 0]))
    files["rgb8_trns.png"] = pil_bytes(pil_img, "PNG", transparency=tuple(int(v) for v in px[7, 9]))
    # Same-valued RGB pixels take libpng's r==g==b shortcut in rgb_to_gray.
    files["rgb8_grayish.png"] = tf.io.encode_png(np.dstack([gray, gray, px[..., 2:3]])).numpy()
    b = files["rgb8.png"]
    files["truncated.png"] = b[: len(b) // 2]
    for name, data in files.items():
        save("png_" + name, bytes(data))
    for name in files:
        src = "png_" + name
        stem = src[:-4]
        data = tf.constant(bytes(files[name]))
        for ch in (0, 1, 3, 4):
            for dt, dn in ((tf.uint8, "u8"), (tf.uint16, "u16")):
                add_case("png", src, dict(channels=ch, dtype=dn), f"{stem}__c{ch}_{dn}",
                         lambda: tf.io.decode_png(data, channels=ch, dtype=dt))


def set_dqt(data, value, precision=0):
    """Rewrites every DQT table of a JPEG so that all 64 entries are `value` (8-bit tables, or
    16-bit ones with precision=1), keeping the tables' ids."""
    out, i = bytearray(data[:2]), 2
    while i < len(data):
        marker = data[i + 1]
        if marker == 0xDA:  # start of scan: copy the rest verbatim
            out += data[i:]
            break
        seglen = struct.unpack(">H", data[i + 2:i + 4])[0]
        seg = data[i + 4:i + 2 + seglen]
        if marker == 0xDB:
            body, j = bytearray(), 0
            while j < len(seg):
                pq, tq = seg[j] >> 4, seg[j] & 15
                j += 1 + 64 * (pq + 1)
                body.append(precision << 4 | tq)
                body += bytes([value] * 64) if precision == 0 else struct.pack(">64H", *([value] * 64))
            out += b"\xff\xdb" + struct.pack(">H", len(body) + 2) + body
        else:
            out += data[i:i + 2 + seglen]
        i += 2 + seglen
    return bytes(out)


def jpeg_simd_fixtures():
    """Files on which libjpeg-turbo's portable C differs from TF's SIMD build: the IDCTs (SSE2,
    16-bit lanes that wrap) overflow on sharp quality-100 content and on large DQT entries.
    The decoder must match TF here (crates/codec/src/jsimd). Written after all other cases, so
    the files and manifest lines above stay as they were."""
    def checker(size, cell, offset=0):
        yy, xx = np.mgrid[0:size, 0:size] + offset
        return np.repeat(((yy // cell + xx // cell) % 2 * 255).astype(np.uint8)[..., None], 3, axis=2)

    px = photo(24, 40, 5)
    base = tf.io.encode_jpeg(px, quality=90).numpy()
    base444 = tf.io.encode_jpeg(px, quality=90, chroma_downsampling=False).numpy()
    files = {
        # Black/white 8x8 image of 4x4 squares: the IFAST IDCT overflows at quality 100.
        "simd_checker_q100_420.jpg": tf.io.encode_jpeg(checker(8, 4), quality=100).numpy(),
        "simd_checker_q100_444.jpg": tf.io.encode_jpeg(checker(8, 4), quality=100,
                                                       chroma_downsampling=False).numpy(),
        "simd_checker5_q100_420.jpg": tf.io.encode_jpeg(checker(16, 5, 3), quality=100).numpy(),
        "simd_photo_q95.jpg": tf.io.encode_jpeg(photo(24, 40, 6), quality=95).numpy(),
        "simd_photo_q98.jpg": tf.io.encode_jpeg(photo(24, 40, 7), quality=98).numpy(),
        "simd_photo_q100.jpg": tf.io.encode_jpeg(photo(24, 40, 8), quality=100).numpy(),
        "simd_photo_q100_444.jpg": tf.io.encode_jpeg(photo(24, 40, 9), quality=100,
                                                     chroma_downsampling=False).numpy(),
        "simd_photo_q100_gray.jpg": tf.io.encode_jpeg(photo(24, 40, 10)[..., :1], quality=100).numpy(),
        "simd_photo_q100_422.jpg": pil_bytes(Image.fromarray(photo(24, 40, 11)), "JPEG", quality=100,
                                             subsampling=1),
    }
    for v in (20, 60, 255):
        files[f"simd_dqt{v}_420.jpg"] = set_dqt(base, v)
        files[f"simd_dqt{v}_444.jpg"] = set_dqt(base444, v)
    # 16-bit tables: 20000 makes IFAST multipliers that do not fit 16 bits (TF's `short`
    # table truncates them).
    for v in (3000, 20000):
        files[f"simd_dqt16_{v}_420.jpg"] = set_dqt(base, v, precision=1)
    for name, data in files.items():
        save("jpeg_" + name, bytes(data))
    for name in files:
        src = "jpeg_" + name
        stem = src[:-4]
        data = tf.constant(bytes(files[name]))
        for ch in (0, 1):
            add_case("jpeg", src, dict(channels=ch), f"{stem}__c{ch}",
                     lambda: tf.io.decode_jpeg(data, channels=ch))
            add_case("jpeg", src, dict(channels=ch, dct="INTEGER_ACCURATE"), f"{stem}__c{ch}_accurate",
                     lambda: tf.io.decode_jpeg(data, channels=ch, dct_method="INTEGER_ACCURATE"))
        add_case("jpeg", src, dict(channels=3, fancy=0), f"{stem}__c3_nofancy",
                 lambda: tf.io.decode_jpeg(data, channels=3, fancy_upscaling=False))
        for ratio in (2, 4, 8):  # the reduced-size IDCTs (4x4, 2x2)
            add_case("jpeg", src, dict(channels=3, ratio=ratio), f"{stem}__c3_r{ratio}",
                     lambda: tf.io.decode_jpeg(data, channels=3, ratio=ratio))


def main():
    os.makedirs(OUT, exist_ok=True)
    jpeg_fixtures()
    png_fixtures()
    jpeg_simd_fixtures()
    with open(os.path.join(OUT, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{len(lines)} cases in {OUT}")


if __name__ == "__main__":
    main()
