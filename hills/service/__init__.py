"""The evaluation service (`hills serve`): its client, protocol, request
records, server and set-up."""
