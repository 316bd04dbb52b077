;;; tests/web/html.scm --- (plucky web html)

(use-modules (srfi srfi-64)
             (srfi srfi-11)
             (rnrs bytevectors)
             (ice-9 iconv)
             (web response)
             (tests lib harness)
             (plucky web html))

(define-syntax-rule (test-html name tree expected)
  (test-equal name expected (html->string tree)))
(define-syntax-rule (test-refused name tree)
  (test-error name #t (html->string tree)))

(test-begin "web/html")

(test-group "write-html: text"
  (call-guarded
   (lambda ()
     (test-html "plain" '(p "hello") "<p>hello</p>")
     (test-html "the five" '(p "<>&\"'") "<p>&lt;&gt;&amp;&quot;&#39;</p>")
     (test-html "a script as text" '(p "<script>alert(1)</script>")
                "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>")
     (test-html "an entity is text" '(p "&amp;") "<p>&amp;amp;</p>")
     (test-html "NUL and controls become U+FFFD" '(p "a\x00b\x01c\x7f")
                "<p>a\uFFFDb\uFFFDc\uFFFD</p>")
     (test-html "tab, newline, return, form feed stay" '(p "a\tb\nc\rd\fe") "<p>a\tb\nc\rd\fe</p>")
     (test-html "U+FFFD from invalid UTF-8 read leniently"
                `(p ,(bytevector->string #vu8(97 #xff 98) "UTF-8" (quote substitute)))
                "<p>a\uFFFDb</p>")
     (test-html "every width of UTF-8" '(p "é€𝄞") "<p>é€𝄞</p>")
     (test-equal "UTF-8 bytes" (string->utf8 "<p>é€𝄞</p>") (html->bytevector '(p "é€𝄞")))
     (test-html "numbers" '(p 42 " " 1.5) "<p>42 1.5</p>")
     (test-html "a long text (the buffer grows)" `(p ,(make-string 100000 #\<))
                (string-append "<p>" (string-join (make-list 100000 "&lt;") "") "</p>")))))

(test-group "write-html: elements"
  (call-guarded
   (lambda ()
     (test-html "nested" '(div (p "a") (p "b")) "<div><p>a</p><p>b</p></div>")
     (test-html "void elements" '(p "a" (br) (img (@ (src "x.png"))) (hr))
                "<p>a<br><img src=\"x.png\"><hr></p>")
     (test-refused "a void element with content" '(br "x"))
     (test-html "lists of children, #f and () are flattened or nothing"
                `(ul ,(map (lambda (x) `(li ,x)) '("a" "b")) #f () ,(and #f '(li "c")))
                "<ul><li>a</li><li>b</li></ul>")
     (test-html "empty element" '(p) "<p></p>")
     (test-html "doctype before html" '(html (body))
                "<!DOCTYPE html>\n<html><body></body></html>")
     (test-html "*TOP* and comments" '(*TOP* (*COMMENT* "x") (p "a")) "<p>a</p>")
     (test-html "script is raw text" '(script "if (a < b && c) f('x');")
                "<script>if (a < b && c) f('x');</script>")
     (test-refused "script text that would end it" '(script "x</SCRIPT><b>"))
     (test-refused "style text that would end it" '(style "</style"))
     (test-refused "a tag name with a space" '(|a b| "x"))
     (test-refused "a tag name with >" '(|a>| "x"))
     (test-refused "a vector" `(p ,(vector 1))))))

(test-group "write-html: attributes"
  (call-guarded
   (lambda ()
     (test-html "escaped" '(a (@ (href "/?a=1&b=\"2\"") (title "<'>")) "x")
                "<a href=\"/?a=1&amp;b=&quot;2&quot;\" title=\"&lt;&#39;&gt;\">x</a>")
     (test-html "boolean true" '(input (@ (type "checkbox") (checked #t)))
                "<input type=\"checkbox\" checked>")
     (test-html "#f omitted" '(input (@ (disabled #f) (value "v"))) "<input value=\"v\">")
     (test-html "a number" '(td (@ (colspan 2))) "<td colspan=\"2\"></td>")
     (test-html "data- and aria- names" '(div (@ (data-id "1") (aria-label "l")))
                "<div data-id=\"1\" aria-label=\"l\"></div>")
     (test-refused "an attribute name with a space" '(p (@ (|on click| "x"))))
     (test-refused "an attribute name with =" '(p (@ (|a=b| "x"))))
     (test-refused "an attribute name with a quote" `(p (@ (,(string->symbol "a\"") "x"))))
     (test-refused "an attribute name starting with a digit" '(p (@ (|1a| "x"))))
     (test-refused "an attribute without a value" '(p (@ (class))))
     (test-refused "an attribute value that is a list" '(p (@ (class ("a"))))))))

(test-group "raw"
  (call-guarded
   (lambda ()
     (test-html "unescaped when asked" `(div ,(raw "<b>ok</b> &amp;")) "<div><b>ok</b> &amp;</div>")
     (test-assert "raw?" (raw? (raw "x")))
     (test-error "raw of a non-string" #t (raw 'x))
     (test-html "a list that looks like raw is an element" '(div (raw "<b>"))
                "<div><raw>&lt;b&gt;</raw></div>"))))

(test-group "write-html"
  (call-guarded
   (lambda ()
     (test-equal "to a port" "<p>a&amp;b</p>"
       (call-with-output-string (lambda (port) (write-html '(p "a&b") port))))
     (test-equal "nothing written for a refused tree" ""
       (call-with-output-string
         (lambda (port) (false-if-exception (write-html '(p "a" (|a b|)) port))))))))

(test-group "html-response"
  (call-guarded
   (lambda ()
     (let-values (((response body) (html-response '(p "é"))))
       (test-equal "headers" '((content-type . (text/html (charset . "utf-8")))) response)
       (test-equal "body" (string->utf8 "<p>é</p>") body))
     (let-values (((response body) (html-response '(p "x") #:code 404)))
       (test-equal "a code" 404 (response-code response))))))

(test-end "web/html")
