"""Reading what a test's channel layer delivered: one group subscription and a drain that stops at the first
0.2 s of silence (the layer delivers in order, so silence after the last send means nothing more is coming)."""

from __future__ import annotations

import asyncio

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer


def subscribe(group: str) -> tuple:
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(group, channel)
    return layer, channel


async def adrain(layer, channel) -> list[dict]:
    """`drain` inside a running loop. A test that drains a Redis layer twice must do it in one loop: channels-redis
    binds a channel's receive buffer to the loop of its first receive."""
    received = []
    while True:
        try:
            received.append(await asyncio.wait_for(layer.receive(channel), timeout=0.2))
        except TimeoutError:
            return received


def drain(layer, channel) -> list[dict]:
    return async_to_sync(adrain)(layer, channel)
