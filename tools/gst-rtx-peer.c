/*
 * tools/gst-rtx-peer.c: a GStreamer 1.22 peer with RFC 4588 retransmission on its own SSRC,
 * for the interop lab tests (Tests/StreamerTests/LabGStreamerRTXTests.swift).
 *
 * gst-launch cannot attach rtprtxsend / rtprtxreceive: rtpbin takes them only from its
 * request-aux-sender / request-aux-receiver signals, so this program builds the pipelines by
 * hand. tools/gst-rtx-peer builds it (gcc, pkg-config gstreamer-1.0) and runs it.
 *
 *   recv: udpsrc (RTP) -> rtpbin rtp-profile=avpf do-retransmission=true, rtprtxreceive
 *         (payload-type-map 96 -> 97, the same direction as rtprtxsend's) -> rtph265depay !
 *         h265parse ! filesink (--output, Annex B access units; decode it with ffmpeg: this
 *         GStreamer has no avdec_h265, and its libde265dec aborts on some of our streams);
 *         RTCP in on --rtcp-port, out from it to --rtcp-host:--rtcp-to.
 *   send: videotestsrc (live) ! x265enc ! h265parse ! rtph265pay pt=96 -> rtpbin
 *         rtp-profile=avpf with rtprtxsend (payload-type-map 96 -> 97, or --rtx-pt) -> udpsink; its RTCP
 *         out to --host:--port+1, in on --rtcp-port.
 *
 * At the end (recv: --idle seconds without a packet after the first, or --seconds; send: all
 * frames sent and --linger seconds more) it prints KEY=VALUE lines on stdout and exits 0.
 */
#include <gst/gst.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  GMainLoop *loop;
  GstElement *pipeline;
  GstElement *rtpbin;
  GstElement *rtx;          /* rtprtxsend or rtprtxreceive, once rtpbin asked for it */
  GstElement *jitterbuffer; /* recv: the session's rtpjitterbuffer */
  GstElement *depay;        /* recv: linked when rtpbin's source pad appears */
  gint64 first_packet;      /* monotonic microseconds; 0 before the first */
  gint64 last_packet;
  guint64 packets;          /* RTP packets out of udpsrc */
  guint64 access_units;     /* recv: out of h265parse */
  guint64 frames_sent;      /* send: access units into the payloader */
  guint64 frames_wanted;
  gboolean eos;
  int idle_seconds, max_seconds, wait_first_seconds, linger_seconds;
  guint rtx_payload_type;   /* send: the RTX payload type (--rtx-pt, default 97) */
  gint64 eos_time;
} Peer;

static void die(const char *message) {
  fprintf(stderr, "gst-rtx-peer: %s\n", message);
  exit(2);
}

static GstElement *make(const char *factory) {
  GstElement *element = gst_element_factory_make(factory, NULL);
  if (element == NULL) {
    fprintf(stderr, "gst-rtx-peer: no GStreamer element %s (install its plugin package)\n", factory);
    exit(2);
  }
  return element;
}

/* Wraps an aux element in a bin with ghost pads named as rtpbin expects for the session. */
static GstElement *aux_bin(GstElement *element, guint session) {
  GstElement *bin = gst_bin_new(NULL);
  gst_bin_add(GST_BIN(bin), element);
  gchar *name = g_strdup_printf("src_%u", session);
  GstPad *pad = gst_element_get_static_pad(element, "src");
  gst_element_add_pad(bin, gst_ghost_pad_new(name, pad));
  gst_object_unref(pad);
  g_free(name);
  name = g_strdup_printf("sink_%u", session);
  pad = gst_element_get_static_pad(element, "sink");
  gst_element_add_pad(bin, gst_ghost_pad_new(name, pad));
  gst_object_unref(pad);
  g_free(name);
  return bin;
}

static GstElement *request_aux_receiver(GstElement *rtpbin, guint session, Peer *peer) {
  (void)rtpbin;
  GstElement *rtx = make("rtprtxreceive");
  /* Keyed by the original payload type, as on the sending side (not by the RTX one). */
  GstStructure *map = gst_structure_new("application/x-rtp-pt-map", "96", G_TYPE_UINT, 97u, NULL);
  g_object_set(rtx, "payload-type-map", map, NULL);
  gst_structure_free(map);
  peer->rtx = gst_object_ref(rtx);
  return aux_bin(rtx, session);
}

static GstElement *request_aux_sender(GstElement *rtpbin, guint session, Peer *peer) {
  (void)rtpbin;
  GstElement *rtx = make("rtprtxsend");
  GstStructure *map = gst_structure_new("application/x-rtp-pt-map", "96", G_TYPE_UINT, peer->rtx_payload_type, NULL);
  g_object_set(rtx, "payload-type-map", map, "max-size-time", 1000u, NULL);
  gst_structure_free(map);
  peer->rtx = gst_object_ref(rtx);
  return aux_bin(rtx, session);
}

/* The caps of payload types 96 (H.265) and 97 (its RTX). */
static GstCaps *request_pt_map(GstElement *rtpbin, guint session, guint pt, Peer *peer) {
  (void)rtpbin; (void)session; (void)peer;
  if (pt == 96)
    return gst_caps_new_simple("application/x-rtp", "media", G_TYPE_STRING, "video", "clock-rate", G_TYPE_INT, 90000,
                               "encoding-name", G_TYPE_STRING, "H265", "payload", G_TYPE_INT, 96, NULL);
  if (pt == 97)
    return gst_caps_new_simple("application/x-rtp", "media", G_TYPE_STRING, "video", "clock-rate", G_TYPE_INT, 90000,
                               "encoding-name", G_TYPE_STRING, "RTX", "apt", G_TYPE_STRING, "96",
                               "payload", G_TYPE_INT, 97, NULL);
  return NULL;
}

static void new_jitterbuffer(GstElement *rtpbin, GstElement *jitterbuffer, guint session, guint ssrc, Peer *peer) {
  (void)rtpbin; (void)session; (void)ssrc;
  if (peer->jitterbuffer == NULL) peer->jitterbuffer = gst_object_ref(jitterbuffer);
}

static void pad_added(GstElement *rtpbin, GstPad *pad, Peer *peer) {
  (void)rtpbin;
  gchar *name = gst_pad_get_name(pad);
  if (g_str_has_prefix(name, "recv_rtp_src_0_") && peer->depay != NULL) {
    GstPad *sink = gst_element_get_static_pad(peer->depay, "sink");
    if (!gst_pad_is_linked(sink) && gst_pad_link(pad, sink) != GST_PAD_LINK_OK)
      fprintf(stderr, "gst-rtx-peer: cannot link %s to the depayloader\n", name);
    gst_object_unref(sink);
  }
  g_free(name);
}

/* Buffers in a probe's data: one, or a list's length (payloaders push lists). */
static guint buffers_in(GstPadProbeInfo *info) {
  if (info->type & GST_PAD_PROBE_TYPE_BUFFER_LIST) return gst_buffer_list_length(GST_PAD_PROBE_INFO_BUFFER_LIST(info));
  return 1;
}

static GstPadProbeReturn count_packet(GstPad *pad, GstPadProbeInfo *info, Peer *peer) {
  (void)pad;
  gint64 now = g_get_monotonic_time();
  if (peer->first_packet == 0) peer->first_packet = now;
  peer->last_packet = now;
  peer->packets += buffers_in(info);
  return GST_PAD_PROBE_OK;
}

static GstPadProbeReturn count_into(GstPad *pad, GstPadProbeInfo *info, guint64 *counter) {
  (void)pad;
  *counter += buffers_in(info);
  return GST_PAD_PROBE_OK;
}

static void probe(GstElement *element, const char *pad_name, GstPadProbeCallback callback, gpointer data) {
  GstPad *pad = gst_element_get_static_pad(element, pad_name);
  gst_pad_add_probe(pad, GST_PAD_PROBE_TYPE_BUFFER | GST_PAD_PROBE_TYPE_BUFFER_LIST, callback, data, NULL);
  gst_object_unref(pad);
}

static void link_pads(GstElement *from, const char *from_pad, GstElement *to, const char *to_pad) {
  if (!gst_element_link_pads(from, from_pad, to, to_pad)) {
    fprintf(stderr, "gst-rtx-peer: cannot link %s to %s\n", from_pad, to_pad);
    exit(2);
  }
}

static gboolean on_bus(GstBus *bus, GstMessage *message, Peer *peer) {
  (void)bus;
  if (GST_MESSAGE_TYPE(message) == GST_MESSAGE_ERROR) {
    GError *error = NULL;
    gst_message_parse_error(message, &error, NULL);
    fprintf(stderr, "gst-rtx-peer: %s\n", error->message);
    g_error_free(error);
    exit(1);
  }
  if (GST_MESSAGE_TYPE(message) == GST_MESSAGE_EOS) peer->eos = TRUE;
  return TRUE;
}

/* Ends the main loop: recv after --idle seconds of silence following the first packet (or no
 * packet within --wait-first), send --linger seconds after the source's end reached the
 * pipeline's sink (or its frame count went through the payloader); both at --seconds. */
static gboolean on_tick(Peer *peer) {
  gint64 now = g_get_monotonic_time();
  static gint64 start = 0;
  if (start == 0) start = now;
  gboolean done = now - start > (gint64)peer->max_seconds * G_USEC_PER_SEC;
  if (peer->idle_seconds > 0) {
    if (peer->first_packet == 0)
      done = done || now - start > (gint64)peer->wait_first_seconds * G_USEC_PER_SEC;
    else
      done = done || now - peer->last_packet > (gint64)peer->idle_seconds * G_USEC_PER_SEC;
  }
  if (peer->linger_seconds >= 0 && (peer->eos || (peer->frames_wanted > 0 && peer->frames_sent >= peer->frames_wanted))) {
    if (peer->eos_time == 0) peer->eos_time = now;
    done = done || now - peer->eos_time > (gint64)peer->linger_seconds * G_USEC_PER_SEC;
  }
  if (done) g_main_loop_quit(peer->loop);
  return G_SOURCE_CONTINUE;
}

static guint64 uint_property(GstElement *element, const char *name) {
  guint value = 0;
  if (element != NULL) g_object_get(element, name, &value, NULL);
  return value;
}

static void print_jitterbuffer(GstElement *jitterbuffer) {
  GstStructure *stats = NULL;
  if (jitterbuffer == NULL) return;
  g_object_get(jitterbuffer, "stats", &stats, NULL);
  if (stats == NULL) return;
  const char *keys[] = {"num-pushed", "num-lost", "num-late", "num-duplicates", "rtx-count", "rtx-success-count"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    guint64 value = 0;
    gst_structure_get_uint64(stats, keys[i], &value);
    printf("jitterbuffer.%s=%" G_GUINT64_FORMAT "\n", keys[i], value);
  }
  gst_structure_free(stats);
}

static const char *option(int argc, char **argv, const char *name, const char *fallback) {
  for (int i = 2; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], name) == 0) return argv[i + 1];
  }
  return fallback;
}

static int int_option(int argc, char **argv, const char *name, int fallback) {
  const char *text = option(argc, argv, name, NULL);
  if (text == NULL) return fallback;
  char *end = NULL;
  long value = strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || value < 0 || value > 1000000) {
    fprintf(stderr, "gst-rtx-peer: %s needs a number, got '%s'\n", name, text);
    exit(2);
  }
  return (int)value;
}

static GstElement *add(Peer *peer, const char *factory) {
  GstElement *element = make(factory);
  gst_bin_add(GST_BIN(peer->pipeline), element);
  return element;
}

static GstElement *make_rtpbin(Peer *peer, int latency) {
  GstElement *rtpbin = make("rtpbin");
  gst_util_set_object_arg(G_OBJECT(rtpbin), "rtp-profile", "avpf");
  g_object_set(rtpbin, "latency", (guint)latency, NULL);
  g_signal_connect(rtpbin, "request-pt-map", G_CALLBACK(request_pt_map), peer);
  gst_bin_add(GST_BIN(peer->pipeline), rtpbin);
  return rtpbin;
}

static void build_recv(Peer *peer, int argc, char **argv) {
  int port = int_option(argc, argv, "--port", 5004);
  GstElement *rtpbin = make_rtpbin(peer, int_option(argc, argv, "--latency", 300));
  g_object_set(rtpbin, "do-retransmission", TRUE, NULL);
  g_signal_connect(rtpbin, "request-aux-receiver", G_CALLBACK(request_aux_receiver), peer);
  g_signal_connect(rtpbin, "new-jitterbuffer", G_CALLBACK(new_jitterbuffer), peer);
  g_signal_connect(rtpbin, "pad-added", G_CALLBACK(pad_added), peer);

  GstElement *rtp = add(peer, "udpsrc");
  GstCaps *caps = request_pt_map(NULL, 0, 96, peer);
  g_object_set(rtp, "port", port, "caps", caps, NULL);
  gst_caps_unref(caps);
  probe(rtp, "src", (GstPadProbeCallback)count_packet, peer);
  link_pads(rtp, "src", rtpbin, "recv_rtp_sink_0");

  GstElement *rtcp_in = add(peer, "udpsrc");
  g_object_set(rtcp_in, "port", int_option(argc, argv, "--rtcp-port", port + 1), NULL);
  link_pads(rtcp_in, "src", rtpbin, "recv_rtcp_sink_0");
  GstElement *rtcp_out = add(peer, "udpsink");
  g_object_set(rtcp_out, "host", option(argc, argv, "--rtcp-host", "127.0.0.1"),
               "port", int_option(argc, argv, "--rtcp-to", 6001), "bind-port", int_option(argc, argv, "--rtcp-port", port + 1),
               "sync", FALSE, "async", FALSE, NULL);
  link_pads(rtpbin, "send_rtcp_src_0", rtcp_out, "sink");

  peer->depay = add(peer, "rtph265depay");
  GstElement *parse = add(peer, "h265parse");
  GstElement *filter = add(peer, "capsfilter");
  GstCaps *byte_stream = gst_caps_from_string("video/x-h265,stream-format=byte-stream,alignment=au");
  g_object_set(filter, "caps", byte_stream, NULL);
  gst_caps_unref(byte_stream);
  const char *output = option(argc, argv, "--output", NULL);
  GstElement *sink = add(peer, output != NULL ? "filesink" : "fakesink");
  if (output != NULL) g_object_set(sink, "location", output, NULL);
  g_object_set(sink, "sync", FALSE, "async", FALSE, NULL);
  if (!gst_element_link_many(peer->depay, parse, filter, sink, NULL)) die("cannot link the depayloading chain");
  probe(sink, "sink", (GstPadProbeCallback)count_into, &peer->access_units);
}

static void build_send(Peer *peer, int argc, char **argv) {
  const char *host = option(argc, argv, "--host", "127.0.0.1");
  int port = int_option(argc, argv, "--port", 5004);
  GstElement *rtpbin = make_rtpbin(peer, 200);
  g_signal_connect(rtpbin, "request-aux-sender", G_CALLBACK(request_aux_sender), peer);

  GstElement *source = add(peer, "videotestsrc");
  peer->frames_wanted = (guint64)int_option(argc, argv, "--frames", 240);
  g_object_set(source, "is-live", TRUE, "num-buffers", (int)peer->frames_wanted, NULL);
  gst_util_set_object_arg(G_OBJECT(source), "pattern", "ball");
  GstElement *filter = add(peer, "capsfilter");
  gchar *text = g_strdup_printf("video/x-raw,width=%d,height=%d,framerate=%d/1", int_option(argc, argv, "--width", 320),
                                int_option(argc, argv, "--height", 240), int_option(argc, argv, "--fps", 30));
  GstCaps *caps = gst_caps_from_string(text);
  g_free(text);
  g_object_set(filter, "caps", caps, NULL);
  gst_caps_unref(caps);
  GstElement *encoder = add(peer, "x265enc");
  gst_util_set_object_arg(G_OBJECT(encoder), "tune", "zerolatency");
  gst_util_set_object_arg(G_OBJECT(encoder), "speed-preset", "ultrafast");
  g_object_set(encoder, "key-int-max", int_option(argc, argv, "--keyint", 30),
               "bitrate", (guint)int_option(argc, argv, "--kbps", 1000), NULL);
  GstElement *parse = add(peer, "h265parse");
  g_object_set(parse, "config-interval", -1, NULL);
  GstElement *payloader = add(peer, "rtph265pay");
  g_object_set(payloader, "pt", 96u, "config-interval", -1, NULL);
  if (!gst_element_link_many(source, filter, encoder, parse, payloader, NULL)) die("cannot link the encoding chain");
  probe(payloader, "sink", (GstPadProbeCallback)count_into, &peer->frames_sent);
  link_pads(payloader, "src", rtpbin, "send_rtp_sink_0");

  GstElement *rtp = add(peer, "udpsink");
  g_object_set(rtp, "host", host, "port", port, "bind-port", int_option(argc, argv, "--bind-port", 6000), NULL);
  probe(rtp, "sink", (GstPadProbeCallback)count_packet, peer);
  link_pads(rtpbin, "send_rtp_src_0", rtp, "sink");
  GstElement *rtcp_out = add(peer, "udpsink");
  g_object_set(rtcp_out, "host", host, "port", int_option(argc, argv, "--rtcp-to", port + 1), "sync", FALSE,
               "async", FALSE, NULL);
  link_pads(rtpbin, "send_rtcp_src_0", rtcp_out, "sink");
  GstElement *rtcp_in = add(peer, "udpsrc");
  g_object_set(rtcp_in, "port", int_option(argc, argv, "--rtcp-port", 6001), NULL);
  link_pads(rtcp_in, "src", rtpbin, "recv_rtcp_sink_0");
}

int main(int argc, char **argv) {
  gst_init(&argc, &argv);
  if (argc < 2 || (strcmp(argv[1], "recv") != 0 && strcmp(argv[1], "send") != 0) || argc % 2 != 0) {
    fprintf(stderr, "usage: gst-rtx-peer recv [--port P] [--rtcp-port P] [--rtcp-host H] [--rtcp-to P] [--latency MS]\n"
                    "                         [--output FILE] [--idle S] [--wait-first S] [--seconds S]\n"
                    "       gst-rtx-peer send [--host H] [--port P] [--bind-port P] [--rtcp-to P] [--rtcp-port P]\n"
                    "                         [--frames N] [--width W] [--height H] [--fps F] [--kbps K] [--keyint N]\n"
                    "                         [--rtx-pt 97] [--linger S] [--seconds S]\n");
    return 2;
  }
  gboolean receiving = strcmp(argv[1], "recv") == 0;
  const char *recv_options[] = {"--port", "--rtcp-port", "--rtcp-host", "--rtcp-to", "--latency", "--output", "--idle",
                                "--wait-first", "--seconds", NULL};
  const char *send_options[] = {"--host", "--port", "--bind-port", "--rtcp-to", "--rtcp-port", "--frames", "--width",
                                "--height", "--fps", "--kbps", "--keyint", "--linger", "--seconds", "--rtx-pt", NULL};
  for (int i = 2; i < argc; i += 2) {
    const char **known = receiving ? recv_options : send_options;
    while (*known != NULL && strcmp(*known, argv[i]) != 0) known++;
    if (*known == NULL) {
      fprintf(stderr, "gst-rtx-peer: unknown option '%s' for %s\n", argv[i], argv[1]);
      return 2;
    }
  }
  Peer peer = {0};
  peer.loop = g_main_loop_new(NULL, FALSE);
  peer.pipeline = gst_pipeline_new(NULL);
  peer.max_seconds = int_option(argc, argv, "--seconds", 120);
  peer.idle_seconds = receiving ? int_option(argc, argv, "--idle", 2) : 0;
  peer.wait_first_seconds = int_option(argc, argv, "--wait-first", 30);
  peer.linger_seconds = receiving ? -1 : int_option(argc, argv, "--linger", 2);
  peer.rtx_payload_type = (guint)int_option(argc, argv, "--rtx-pt", 97);
  if (peer.rtx_payload_type < 97 || peer.rtx_payload_type > 127) die("--rtx-pt: 97 to 127");
  if (receiving)
    build_recv(&peer, argc, argv);
  else
    build_send(&peer, argc, argv);
  GstBus *bus = gst_element_get_bus(peer.pipeline);
  gst_bus_add_watch(bus, (GstBusFunc)on_bus, &peer);
  gst_object_unref(bus);
  g_timeout_add(50, (GSourceFunc)on_tick, &peer);
  if (gst_element_set_state(peer.pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) die("cannot start the pipeline");
  g_main_loop_run(peer.loop);

  if (receiving) {
    printf("packets=%" G_GUINT64_FORMAT "\naccess_units=%" G_GUINT64_FORMAT "\n", peer.packets, peer.access_units);
    printf("rtx.requests=%" G_GUINT64_FORMAT "\nrtx.packets=%" G_GUINT64_FORMAT "\nrtx.assoc_packets=%" G_GUINT64_FORMAT "\n",
           uint_property(peer.rtx, "num-rtx-requests"), uint_property(peer.rtx, "num-rtx-packets"),
           uint_property(peer.rtx, "num-rtx-assoc-packets"));
    print_jitterbuffer(peer.jitterbuffer);
  } else {
    printf("frames=%" G_GUINT64_FORMAT "\npackets=%" G_GUINT64_FORMAT "\n", peer.frames_sent, peer.packets);
    printf("rtx.requests=%" G_GUINT64_FORMAT "\nrtx.packets=%" G_GUINT64_FORMAT "\n",
           uint_property(peer.rtx, "num-rtx-requests"), uint_property(peer.rtx, "num-rtx-packets"));
  }
  fflush(stdout);
  gst_element_set_state(peer.pipeline, GST_STATE_NULL);
  return 0;
}
