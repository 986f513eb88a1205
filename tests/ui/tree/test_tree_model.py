"""The module tree's Qt model: one row per named_modules() entry, check boxes bound to ticks."""

from __future__ import annotations

import pytest
import torch
from PySide6.QtCore import QModelIndex, Qt
from PySide6.QtWidgets import QStyle, QStyleOptionViewItem, QTreeView
from torch import nn

from actviz.core.capture import capture
from actviz.core.tree import module_tree
from actviz.display.text import format_count, format_shape
from actviz.io.models.demo_model import build_demo_model
from actviz.ui.tree.dock import (
    NAME,
    PARAMS,
    SHAPE,
    TYPE,
    ModuleFilterProxy,
    ModuleTreeModel,
    NameRole,
)
from actviz.workspace.session_state import Session, default_layers
from tests.core.seed_models import SeedMLP

CHECK = Qt.ItemDataRole.CheckStateRole


def _all_names(model, parent=None):
    parent = parent if parent is not None else QModelIndex()
    names = []
    for row in range(model.rowCount(parent)):
        index = model.index(row, 0, parent)
        names.append(index.data(NameRole))
        names.extend(_all_names(model, index))
    return names


def _tiny_cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.ReLU(),
        nn.Sequential(nn.Conv2d(4, 6, 3, padding=1), nn.ReLU()),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(6, 3),
    )


def _session_on(model) -> Session:
    s = Session()
    s.set_model(model)
    return s


@pytest.mark.parametrize("factory", [_tiny_cnn, SeedMLP, build_demo_model])
def test_one_row_per_named_module_in_named_modules_order(qtbot, factory):
    model = factory()
    tm = ModuleTreeModel(_session_on(model))
    expected = [name for name, _ in model.named_modules()]
    names = _all_names(tm)
    assert sorted(names) == sorted(expected)
    assert len(names) == len(expected)
    # Depth-first traversal of the tree is named_modules() order.
    assert names == expected


def test_resnet18_tree_rows_and_columns(qtbot, resnet):
    tm = ModuleTreeModel(_session_on(resnet))
    assert len(_all_names(tm)) == len(list(resnet.named_modules())) == 68
    conv = tm.index_of("layer1.0.conv1")
    assert conv.data() == "conv1"
    assert tm.index_of("layer1.0.conv1", TYPE).data() == "Conv2d"
    assert tm.index_of("layer1.0.conv1", PARAMS).data() == format_count(64 * 64 * 9) == "36.9K"
    assert tm.index_of("", NAME).data() == "(model) ResNet"
    assert tm.index_of("", PARAMS).data() == "11.7M"
    assert tm.parent(conv).data(NameRole) == "layer1.0"
    assert tm.parent(tm.index_of("")).isValid() is False
    assert tm.index_of("layer1.0.conv1", SHAPE).data() == ""  # no run yet


def test_check_state_is_the_sessions_ticked_set(qtbot):
    session = _session_on(_tiny_cnn())
    tm = ModuleTreeModel(session)
    session.replace_ticked(["0"])
    assert tm.index_of("0").data(CHECK) == Qt.CheckState.Checked
    assert tm.index_of("1").data(CHECK) == Qt.CheckState.Unchecked
    assert tm.index_of("0", TYPE).data(CHECK) is None  # only the name column has a box
    assert tm.setData(tm.index_of("2.0"), Qt.CheckState.Checked.value, CHECK)
    assert session.ticked == ["0", "2.0"]
    assert tm.setData(tm.index_of("0"), Qt.CheckState.Unchecked, CHECK)
    assert session.ticked == ["2.0"]
    assert tm.flags(tm.index_of("0")) & Qt.ItemFlag.ItemIsUserCheckable
    assert not tm.flags(tm.index_of("0", TYPE)) & Qt.ItemFlag.ItemIsUserCheckable


def test_ticks_changed_elsewhere_repaint_the_rows(qtbot):
    session = _session_on(_tiny_cnn())
    tm = ModuleTreeModel(session)
    changed = []
    session.untick_all()
    tm.dataChanged.connect(
        lambda top, bottom, roles=(): changed.extend(
            tm.index(row, NAME, top.parent()).data(NameRole)
            for row in range(top.row(), bottom.row() + 1)
        )
    )
    session.tick_type("Conv2d")
    # The ticked rows, and the modules holding them (their names turn bold), one signal per
    # parent over its rows: "0" to "2" under the model, "2.0", and the model itself.
    assert sorted(changed) == ["", "0", "1", "2", "2.0"]
    assert tm.index_of("2.0").data(CHECK) == Qt.CheckState.Checked


def test_a_module_holding_ticked_layers_says_so_when_collapsed(qtbot, resnet):
    session = _session_on(resnet)
    tm = ModuleTreeModel(session)
    session.untick_all()
    font = Qt.ItemDataRole.FontRole
    tip = Qt.ItemDataRole.ToolTipRole
    assert tm.index_of("layer1").data(font) is None
    session.set_ticked(["layer1.0.conv1", "layer1.1.conv2"])
    for holder in ("layer1", "layer1.0", "layer1.1"):
        assert tm.index_of(holder).data(font).bold(), holder
    assert tm.index_of("").data(font) is None  # the model itself holds every tick
    assert "2 ticked layers inside" in tm.index_of("").data(tip)
    assert "2 ticked layers inside" in tm.index_of("layer1").data(tip)
    assert "1 ticked layer inside" in tm.index_of("layer1.0").data(tip)
    for other in ("layer2", "layer1.0.conv1", "layer1.0.bn1"):
        assert tm.index_of(other).data(font) is None, other
    assert "inside" not in tm.index_of("layer2").data(tip)
    session.set_ticked(["layer1.0.conv1", "layer1.1.conv2"], False)
    assert tm.index_of("layer1").data(font) is None


def test_clicking_the_check_box_in_a_view_ticks_the_layer(qtbot):
    session = _session_on(_tiny_cnn())
    session.untick_all()
    tm = ModuleTreeModel(session)
    view = QTreeView()
    qtbot.addWidget(view)
    view.setModel(tm)
    view.expandAll()
    view.resize(400, 300)
    view.show()
    qtbot.waitExposed(view)
    index = tm.index_of("1")
    option = QStyleOptionViewItem()
    option.initFrom(view)
    option.rect = view.visualRect(index)
    option.features |= QStyleOptionViewItem.ViewItemFeature.HasCheckIndicator
    box = view.style().subElementRect(QStyle.SubElement.SE_ItemViewItemCheckIndicator, option, view)
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=box.center())
    assert session.ticked == ["1"]
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=box.center())
    assert session.ticked == []


def test_output_shapes_after_a_run_without_resetting_the_view(qtbot):
    model = _tiny_cnn()
    session = _session_on(model)
    tm = ModuleTreeModel(session)
    resets = []
    tm.modelReset.connect(lambda: resets.append(1))
    cap = capture(model, torch.randn(1, 3, 8, 8), ["0", "2", "5"])
    tm.update_tree(module_tree(model, cap))
    assert resets == []
    assert tm.index_of("0", SHAPE).data() == "1×4×8×8"
    assert tm.index_of("2", SHAPE).data() == "1×6×8×8"
    assert tm.index_of("5", SHAPE).data() == "1×3"
    assert tm.index_of("1", SHAPE).data() == ""  # not captured


def test_calls_show_for_modules_run_twice(qtbot):
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            return self.lin(self.lin(x))

    model = Twice()
    session = _session_on(model)
    tm = ModuleTreeModel(session)
    tm.update_tree(module_tree(model, capture(model, torch.randn(1, 2), ["lin"])))
    assert tm.index_of("lin", SHAPE).data() == "1×2  (2 calls)"


def test_new_model_resets(qtbot):
    session = _session_on(_tiny_cnn())
    tm = ModuleTreeModel(session)
    resets = []
    tm.modelReset.connect(lambda: resets.append(1))
    session.set_model(SeedMLP())
    assert resets == [1]
    assert _all_names(tm) == ["", "fc1", "s1", "fc2", "s2"]


def test_filter_by_type_keeps_matches_and_their_ancestors(qtbot, resnet):
    tm = ModuleTreeModel(_session_on(resnet))
    proxy = ModuleFilterProxy()
    proxy.setSourceModel(tm)
    proxy.set_text("Conv2d")
    shown = _all_names(proxy)
    convs = [n for n, m in resnet.named_modules() if isinstance(m, nn.Conv2d)]
    assert len(convs) == 20
    assert set(convs) <= set(shown)
    others = set(shown) - set(convs)
    # Only containers on the way to a conv remain besides the convs themselves.
    assert all(any(c.startswith(f"{o}.") or o == "" for c in convs) for o in others)
    assert "layer1.0.bn1" not in shown and "fc" not in shown


def test_filter_by_name_is_case_insensitive(qtbot, resnet):
    tm = ModuleTreeModel(_session_on(resnet))
    proxy = ModuleFilterProxy()
    proxy.setSourceModel(tm)
    proxy.set_text("LAYER4.1.BN")
    assert _all_names(proxy) == ["", "layer4", "layer4.1", "layer4.1.bn1", "layer4.1.bn2"]
    proxy.set_text("")
    assert len(_all_names(proxy)) == 68


def test_session_context_actions(resnet):
    session = _session_on(resnet)
    session.untick_all()
    assert session.ticked == []
    session.tick_leaves_below("layer1.0")
    assert session.ticked == [
        "layer1.0.conv1", "layer1.0.bn1", "layer1.0.relu", "layer1.0.conv2", "layer1.0.bn2",
    ]  # fmt: skip
    session.untick_all()
    session.tick_type("BatchNorm2d")
    assert len(session.ticked) == 20 and all(
        ".bn" in n or "downsample.1" in n or n == "bn1" for n in session.ticked
    )
    session.tick_leaves_below("fc")  # a leaf ticks itself
    assert "fc" in session.ticked


def test_default_ticks_are_block_outputs(resnet):
    assert default_layers(module_tree(resnet)) == ["layer1", "layer2", "layer3", "layer4", "fc"]
    demo = module_tree(build_demo_model())
    assert default_layers(demo) == [
        "features.block1", "features.block2", "features.block3", "features.block4", "fc",
    ]  # fmt: skip
    assert default_layers(module_tree(SeedMLP())) == ["fc1", "s1", "fc2", "s2"]
    # A flat stack of many leaves (VGG-like): convolutions spread evenly, plus the head.
    flat = nn.Sequential(
        *[m for _ in range(10) for m in (nn.Conv2d(2, 2, 1), nn.ReLU())],
        nn.Flatten(),
        nn.Linear(2, 3),
    )
    picks = default_layers(module_tree(flat))
    assert picks == ["0", "4", "6", "8", "12", "16", "18", "21"]  # first and last conv kept


def test_format_helpers():
    assert format_shape((1, 64, 56, 56)) == "1×64×56×56"
    assert format_shape(()) == "scalar"
    assert format_shape(None) == ""
    assert format_count(999) == "999" and format_count(9408) == "9408"
    assert format_count(11_689_512) == "11.7M"


def test_update_tree_emits_one_change_per_parent_and_none_when_nothing_changed(qtbot):
    model = _tiny_cnn()
    session = _session_on(model)
    tm = ModuleTreeModel(session)
    spans = []
    tm.dataChanged.connect(
        lambda top, bottom, roles=(): spans.append(
            (top.data(NameRole), bottom.data(NameRole), top.column(), bottom.column())
        )
    )
    cap = capture(model, torch.randn(1, 3, 8, 8), ["0", "2", "5"])
    tm.update_tree(module_tree(model, cap))
    # "0", "2" and "5" are siblings under the root module: one signal over rows 0..5
    assert spans == [("0", "5", SHAPE, PARAMS)]
    spans.clear()
    tm.update_tree(module_tree(model, capture(model, torch.randn(1, 3, 8, 8), ["0", "2", "5"])))
    assert spans == []  # same shapes: no repaint at all
    tm.update_tree(module_tree(model, capture(model, torch.randn(1, 3, 6, 6), ["0"])))
    assert spans and tm.index_of("0", SHAPE).data() == "1×4×6×6"


def test_untick_all_repaints_one_span_per_parent(qtbot, resnet):
    # One dataChanged per module held "Untick all" 58 ms on ResNet-18's leaves (issue #37).
    session = _session_on(resnet)
    tm = ModuleTreeModel(session)
    session.replace_ticked(session.tree.leaves())
    spans = []
    tm.dataChanged.connect(
        lambda top, bottom, roles=(): spans.append((top.parent().data(NameRole), top, bottom))
    )
    session.untick_all()
    parents = [p for p, _, _ in spans]
    assert len(parents) == len(set(parents)) == 17  # the model's and each holder's rows
    covered = {
        tm.index(row, NAME, top.parent()).data(NameRole)
        for _, top, bottom in spans
        for row in range(top.row(), bottom.row() + 1)
    }
    assert set(session.tree.leaves()) <= covered and "layer1.0" in covered and "" in covered
    assert all(tm.index_of(n).data(CHECK) == Qt.CheckState.Unchecked for n in covered)


def test_ticks_do_not_refilter_the_rows(qtbot, resnet, monkeypatch):
    # Ticks never change which rows a filter keeps: re-filtering each changed row and its
    # holders in Python slowed "Untick all" (issue #37); the filter text still re-filters.
    asked = []
    original = ModuleFilterProxy.filterAcceptsRow
    monkeypatch.setattr(
        ModuleFilterProxy,
        "filterAcceptsRow",
        lambda self, row, parent: asked.append(row) or original(self, row, parent),
    )
    session = _session_on(resnet)
    tm = ModuleTreeModel(session)
    proxy = ModuleFilterProxy()
    proxy.setSourceModel(tm)
    view = QTreeView()
    qtbot.addWidget(view)
    view.setModel(proxy)
    view.expandAll()
    session.replace_ticked(session.tree.leaves())
    asked.clear()
    session.untick_all()
    assert asked == []
    proxy.set_text("downsample")
    assert (
        asked and "layer2.0.downsample" in _all_names(proxy) and "layer1" not in _all_names(proxy)
    )
