"""Inputs for models whose forward takes a list of images (torchvision's detectors)."""

from __future__ import annotations

import numpy as np
import torch
import torchvision
from PIL import Image
from torch import nn
from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_320_fpn

from actviz.io.input_files import forward_takes_list, open_input
from actviz.io.models.loaded_model import LoadedModel


class ListNet(nn.Module):
    """Annotated like torchvision's detectors; a string annotation here (``from __future__``)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 2, 3)

    def forward(self, images: list[torch.Tensor]) -> torch.Tensor:
        return torch.stack([self.conv(im[None])[0].mean() for im in images])


class PlainNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 2, 3)

    def forward(self, x: torch.Tensor, *rest) -> torch.Tensor:
        return self.conv(x)


def test_forward_takes_list_reads_the_annotation():
    detector = fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None)
    assert forward_takes_list(detector)  # images: list[Tensor]
    assert forward_takes_list(ListNet())
    assert not forward_takes_list(PlainNet())
    assert not forward_takes_list(torchvision.models.resnet18(weights=None))  # unannotated
    assert not forward_takes_list(nn.Sequential(nn.Identity()))


def test_image_for_a_detector_is_a_list_of_one_chw_image(tmp_path):
    weights = torchvision.models.detection.FasterRCNN_MobileNet_V3_Large_320_FPN_Weights.DEFAULT
    model = fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None).eval()
    loaded = LoadedModel(model, "frcnn", "frcnn", "torchvision", transforms=weights.transforms())
    pixels = np.zeros((30, 40, 3), np.uint8)
    pixels[:, :20] = (255, 0, 0)
    path = tmp_path / "half.png"
    Image.fromarray(pixels, "RGB").save(path)
    inp = open_input(path, loaded_model=loaded)
    assert isinstance(inp.value, list) and len(inp.value) == 1
    (image,) = inp.value
    assert image.shape == (3, 30, 40) and image.dtype == torch.float32
    assert float(image[0, 0, 0]) == 1.0 and float(image[0, 0, 39]) == 0.0  # [0, 1], no resize
    assert inp.image.shape == (30, 40, 3) and tuple(inp.image[0, 0]) == (255, 0, 0)
    assert inp.description.endswith("as a list of 1 image")
    # the user overrides the model's annotation either way
    assert open_input(path, loaded_model=loaded, as_list=False).value.shape == (1, 3, 30, 40)


def test_batches_and_tensor_files_split_into_lists(tmp_path):
    batch = open_input("random:2x3x8x8", model=PlainNet(), as_list=True)
    assert [t.shape for t in batch.value] == [(3, 8, 8), (3, 8, 8)]
    whole = open_input("random:2x3x8x8", model=PlainNet())
    assert torch.equal(torch.stack(batch.value), whole.value)
    assert batch.description.endswith("as a list of 2 images") and batch.image.shape == (8, 8, 3)
    path = tmp_path / "two.pt"
    torch.save([torch.ones(3, 5, 5), torch.zeros(3, 4, 6)], path)
    loaded = open_input(path, model=ListNet())  # detected from the annotation
    assert isinstance(loaded.value, list) and [t.shape for t in loaded.value] == [
        (3, 5, 5),
        (3, 4, 6),
    ]
    assert isinstance(open_input(path, model=PlainNet()).value, tuple)  # positional args
