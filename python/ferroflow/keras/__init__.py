"""``ferroflow.keras``: Keras's utilities over ferroflow (``keras.utils``)."""
import types

from ferroflow.data import image_dataset_from_directory

utils = types.SimpleNamespace(image_dataset_from_directory=image_dataset_from_directory)
