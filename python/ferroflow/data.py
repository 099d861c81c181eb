"""``ferroflow.data``: tf.data-style input pipelines run by ferroflow's Rust workers, iterated
as NumPy arrays. Built-in image loading (:meth:`Dataset.map_load_image`, or ``map`` with
:func:`load_image`) runs without the GIL; a Python ``map`` function takes the GIL only while
it runs."""
from __future__ import annotations

from typing import Any, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ferroflow import _native

AUTOTUNE = -1


class load_image:  # noqa: N801 (a function-like descriptor, as tf.io's functions are used)
    """A built-in map function: the file path read, decoded (JPEG, PNG, BMP, GIF) to
    ``channels`` and resized to float32 ``size`` (``None``: uint8 as decoded) — in Rust."""

    def __init__(self, size: Optional[Sequence[int]] = None, channels: int = 3, component: int = 0) -> None:
        self.size = None if size is None else (int(size[0]), int(size[1]))
        self.channels, self.component = channels, component


class Dataset:
    """A dataset of elements that are one array or a tuple of arrays."""

    def __init__(self, native: _native.Dataset, single: Optional[bool]) -> None:
        self._native, self._single = native, single

    @staticmethod
    def from_tensor_slices(tensors: Any) -> "Dataset":
        single = not isinstance(tensors, (tuple, list))
        parts = [tensors] if single else list(tensors)
        return Dataset(_native.Dataset.from_tensor_slices([np.asarray(p) for p in parts]), single)

    @staticmethod
    def list_files(file_pattern: str, shuffle: Optional[bool] = None, seed: Optional[int] = None) -> "Dataset":
        return Dataset(_native.Dataset.list_files(str(file_pattern), True if shuffle is None else shuffle, seed), True)

    def map(self, map_func: Any, num_parallel_calls: Optional[int] = None) -> "Dataset":
        if isinstance(map_func, load_image):
            native = self._native.map_load_image(map_func.component, map_func.channels, map_func.size, num_parallel_calls)
            return Dataset(native, self._single)
        if not callable(map_func):
            raise TypeError(f"map takes a callable or ferroflow.data.load_image, got {type(map_func).__name__}")
        # A function's result is one array or a tuple: each element says which.
        return Dataset(self._native.map_py(map_func, num_parallel_calls), None)

    def map_load_image(self, size: Optional[Sequence[int]] = None, channels: int = 3, num_parallel_calls: Optional[int] = None) -> "Dataset":
        return self.map(load_image(size, channels), num_parallel_calls)

    def shuffle(self, buffer_size: int, seed: Optional[int] = None, reshuffle_each_iteration: bool = True) -> "Dataset":
        return Dataset(self._native.shuffle(buffer_size, seed, reshuffle_each_iteration), self._single)

    def batch(self, batch_size: int, drop_remainder: bool = False) -> "Dataset":
        return Dataset(self._native.batch(batch_size, drop_remainder), self._single)

    def prefetch(self, buffer_size: int) -> "Dataset":
        return Dataset(self._native.prefetch(buffer_size), self._single)

    def cache(self, filename: str = "") -> "Dataset":
        return Dataset(self._native.cache(filename or None), self._single)

    def repeat(self, count: Optional[int] = None) -> "Dataset":
        return Dataset(self._native.repeat(None if count is None or count < 0 else count), self._single)

    def take(self, count: int) -> "Dataset":
        return Dataset(self._native.take(count), self._single)

    def __iter__(self) -> Iterator[Any]:
        for parts in self._native.iterate():
            one = self._single if self._single is not None else len(parts) == 1
            yield parts[0] if one else tuple(parts)

    def as_numpy_iterator(self) -> Iterator[Any]:
        return iter(self)


def image_dataset_from_directory(
    directory: str,
    labels: str = "inferred",
    label_mode: str = "int",
    batch_size: int = 32,
    image_size: Tuple[int, int] = (256, 256),
    shuffle: bool = True,
    seed: Optional[int] = None,
    validation_split: Optional[float] = None,
    subset: Optional[str] = None,
    **_: Any,
) -> Dataset:
    """Keras's ``image_dataset_from_directory``: batches of ``(images, labels)`` from class
    folders; ``class_names`` on the result."""
    if labels != "inferred":
        raise ValueError("only labels='inferred' (from the class folders) is supported")
    native, class_names = _native.image_dataset_from_directory(
        str(directory), tuple(image_size), batch_size, shuffle, seed, validation_split, subset, label_mode
    )
    ds = Dataset(native, single=False)
    ds.class_names = class_names  # type: ignore[attr-defined]
    return ds


__all__: List[str] = ["AUTOTUNE", "Dataset", "load_image", "image_dataset_from_directory"]

