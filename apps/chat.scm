;;; apps/chat.scm --- a chat room over WebSocket, server-sent events as fallback
;;;
;;; Serve it:  bin/plucky serve apps/chat.scm --workers 1
;;; then open http://127.0.0.1:8080/ in two browsers.
;;;
;;;   GET  /         the page: a message list and a form
;;;   GET  /ws       the WebSocket: each text message sent is said to all;
;;;                  the last 50 messages arrive on opening
;;;   GET  /events   server-sent events, for a browser without WebSocket
;;;                  (or a proxy that refuses the upgrade), one thread each
;;;   POST /say      text=… : what such a browser says
;;;
;;; One worker: the room is this process's memory.  Workers are separate
;;; processes, so with several a message reaches only the clients of the
;;; worker it arrived on; a room across workers needs a channel between
;;; them (a pipe to the master, or a Unix socket each), not written here.
;;;
;;; WebSocket callbacks run on the worker's loop thread, and so does POST
;;; /say (a plain handler): both call `say!' there.  The event streams run
;;; on threads of the pool and only read the history, under its mutex.

(use-modules (plucky server)
             (plucky web websocket)
             (plucky web forms)
             (web request)
             (web uri)
             (web response)
             (rnrs bytevectors)
             (ice-9 threads))

(define max-text 500)
(define history-size 50)

;; The last messages, newest first, each (id . text), and the id of the
;; newest; under `lock', which `changed' signals.
(define history '())
(define last-id 0)
(define lock (make-mutex))
(define changed (make-condition-variable))

;; The open WebSockets of this worker.
(define sockets '())

(define (say! text)
  ;; Keep TEXT in the history and send it to everyone.  On the loop's
  ;; thread.
  (let ((text (if (> (string-length text) max-text) (substring text 0 max-text) text)))
    (with-mutex lock
      (set! last-id (+ last-id 1))
      (set! history (cons (cons last-id text)
                          (if (>= (length history) history-size)
                              (list-head history (- history-size 1))
                              history)))
      (broadcast-condition-variable changed))
    (for-each (lambda (ws)
                ;; A client whose queue is full misses the message rather
                ;; than slowing the room.
                (websocket-send ws text))
              sockets)))

(define (history-after id)
  ;; -> the messages newer than ID, oldest first
  (with-mutex lock
    (reverse (filter (lambda (m) (> (car m) id)) history))))

(define (events port)
  ;; An event stream: the history, then each message as it is said, until
  ;; the client goes (the write raises, which ends the stream).
  (let lp ((seen 0))
    (let ((new (history-after seen)))
      (for-each (lambda (m)
                  (format port "id: ~a\ndata: ~a\n\n" (car m)
                          (string-map (lambda (c) (if (char=? c #\newline) #\space c))
                                      (cdr m))))
                new)
      (when (null? new)
        ;; A comment, so that the head goes out at once and a client
        ;; that is gone is noticed: the write raises, which ends the
        ;; stream and frees the thread.
        (display ": waiting\n\n" port))
      (force-output port)
      (let ((seen (if (null? new) seen (caar (last-pair new)))))
        (with-mutex lock
          (when (= last-id seen)
            (wait-condition-variable changed lock (+ (current-time) 15))))
        (lp seen)))))

(define page "<!DOCTYPE html>
<html lang=\"en\"><head><meta charset=\"utf-8\"><title>plucky chat</title>
<style>body{font-family:sans-serif;max-width:40em;margin:2em auto}
#log{list-style:none;padding:0;border:1px solid #ccc;height:20em;overflow-y:auto}
#log li{padding:.2em .5em}#how{color:#888}</style></head>
<body><h1>plucky chat</h1>
<ul id=\"log\"></ul>
<form id=\"say\" method=\"post\" action=\"/say\">
<input name=\"text\" id=\"text\" autocomplete=\"off\" maxlength=\"500\" autofocus>
<button>Say</button></form>
<p id=\"how\"></p>
<script>
var log = document.getElementById('log'), how = document.getElementById('how');
var ws = null;
function show(text) {
  var li = document.createElement('li'); li.textContent = text;
  log.appendChild(li); log.scrollTop = log.scrollHeight;
}
function fallback() {
  how.textContent = 'server-sent events';
  var es = new EventSource('/events');
  es.onmessage = function (e) { show(e.data); };
}
if (window.WebSocket) {
  ws = new WebSocket((location.protocol == 'https:' ? 'wss://' : 'ws://') + location.host + '/ws');
  var opened = false;
  ws.onopen = function () { opened = true; how.textContent = 'WebSocket'; };
  ws.onmessage = function (e) { show(e.data); };
  ws.onclose = function () { if (!opened) { ws = null; fallback(); } else how.textContent = 'closed'; };
} else fallback();
document.getElementById('say').onsubmit = function (e) {
  var input = document.getElementById('text');
  e.preventDefault();
  if (!input.value) return;
  if (ws && ws.readyState == 1) ws.send(input.value);
  else fetch('/say', {method: 'POST', body: new URLSearchParams({text: input.value})});
  input.value = '';
};
</script></body></html>
")

(define (chat request body)
  (let ((path (uri-path (request-uri request))))
    (cond
     ((and (string=? path "/ws") (websocket-request? request))
      (websocket-upgrade
       request
       #:max-message (* 4 max-text)
       #:on-open (lambda (ws)
                   (set! sockets (cons ws sockets))
                   (for-each (lambda (m) (websocket-send ws (cdr m)))
                             (history-after 0)))
       #:on-message (lambda (ws message)
                      (if (string? message)
                          (say! message)
                          (websocket-close ws 1003 "text only")))
       #:on-close (lambda (ws code reason)
                    (set! sockets (delq ws sockets)))))
     ((string=? path "/events")
      (values '((content-type . (text/event-stream))
                (cache-control . (no-cache)))
              events))
     ((and (string=? path "/say") (eq? (request-method request) 'POST))
      (let* ((fields (urlencoded->alist (if body (utf8->string body) "")))
             (text (assoc-ref fields "text")))
        (when (and text (not (string-null? text)))
          (say! text))
        (values (build-response #:code 303
                                #:headers `((location . ,(string->uri-reference "/"))))
                "")))
     ((string=? path "/")
      (values '((content-type . (text/html (charset . "utf-8")))) page))
     (else
      (values (build-response #:code 404 #:headers '((content-type . (text/plain))))
              "not found\n")))))

chat
