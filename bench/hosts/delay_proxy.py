#!/usr/bin/env python3
"""A TCP proxy that adds latency, for bench/scripts/multi-host.sh.

    delay_proxy.py --listen ADDRESS:PORT --to-unix SOCKET --delay-ms D

Every byte from the client reaches the server's Unix socket D ms after it arrived, and every
byte of the answer reaches the client D ms after the server sent it (a round trip gains 2·D),
in order and without a limit on throughput: the latency of a network, which the kernel's netem
would add if this machine had it. Runs until killed.
"""
import argparse
import asyncio
import sys


async def pump(reader, writer, delay):
    """Copies reader to writer, each chunk `delay` seconds after it was read."""
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()

    async def deliver():
        while True:
            due, chunk = await queue.get()
            if chunk is None:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(chunk)
            await writer.drain()
        writer.close()

    sender = asyncio.create_task(deliver())
    try:
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                break
            queue.put_nowait((loop.time() + delay, chunk))
    except ConnectionError:
        pass
    queue.put_nowait((0, None))
    try:
        await sender
    except ConnectionError:
        pass


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", required=True, help="ADDRESS:PORT to listen on")
    parser.add_argument("--to-unix", required=True, help="the server's Unix socket")
    parser.add_argument("--delay-ms", type=float, required=True, help="one-way delay")
    arguments = parser.parse_args()
    address, _, port = arguments.listen.rpartition(":")
    if not address or not port.isdigit() or arguments.delay_ms < 0:
        sys.exit(f"delay_proxy.py: --listen takes ADDRESS:PORT and --delay-ms a number ≥ 0")
    delay = arguments.delay_ms / 1000.0

    async def serve(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_unix_connection(arguments.to_unix)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(pump(client_reader, server_writer, delay),
                             pump(server_reader, client_writer, delay))

    server = await asyncio.start_server(serve, address, int(port))
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
