"""Sensors start switched on unless ``MEMTEND_SENSORS=off`` (a shared graph, a test instance)."""

import os

import dagster as dg


def default_sensor_status() -> dg.DefaultSensorStatus:
    if os.environ.get("MEMTEND_SENSORS", "on").lower() == "off":
        return dg.DefaultSensorStatus.STOPPED
    return dg.DefaultSensorStatus.RUNNING
