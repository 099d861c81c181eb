"""Photo-like test images shared by the fixture scripts (numpy only)."""
import numpy as np


def photo(h, w, seed):
    """Photo-like RGB: smooth gradients, blobs, an edge, fine texture and noise."""
    r = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.zeros((h, w, 3))
    for c in range(3):
        img[..., c] = 110 + 60 * np.sin(x / w * (2 + c) + c) * np.cos(y / h * (3 - c))
        for _ in range(4):  # soft blobs
            cy, cx, s, a = r.uniform(0, h), r.uniform(0, w), r.uniform(3, w / 3), r.uniform(-80, 80)
            img[..., c] += a * np.exp(-((y - cy) ** 2 + (x - cx) ** 2) / (2 * s * s))
    # Multi-octave value noise gives a realistic spectrum.
    for octave in (4, 8, 16, 32):
        gh, gw = h // octave + 2, w // octave + 2
        g = r.normal(0, 40 / (octave ** 0.5), (gh, gw, 3))
        img += np.kron(g, np.ones((octave, octave, 1)))[:h, :w]
    img[:, w * 2 // 3:, :] += 35  # a hard vertical edge
    img += r.normal(0, 4, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)
