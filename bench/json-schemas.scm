;;; bench/json-schemas.scm --- the three benchmark documents as define-json-type declarations

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The shapes of ../shared/data/json/{twitter,citm_catalog,canada}.json
;;; (miloyip/nativejson-benchmark's documents), declared field by field
;;; in each object's document order, so that bench/json can time the
;;; decoders and encoders (plucky web json schema) compiles, and
;;; tests/web/json.scm can check them against the generic codec.  Every
;;; field of the documents is declared: encoding a decoded document
;;; gives the same JSON value back.  Fields that only some objects have
;;; take json-absent.  The news site's JSON view is declared the same
;;; way where it is used: news-item in apps/news/feeds.scm.
;;;
;;; Code:

(define-module (bench json-schemas)
  #:use-module (plucky web json schema)
  #:export (json->twitter twitter->json
            twitter-statuses status-text status-user user-screen-name
            json->citm-catalog citm-catalog->json
            citm-catalog-performances citm-catalog-events performance-prices price-amount
            json->canada canada->json
            canada-features feature-geometry geometry-coordinates))

;;; twitter.json: {"statuses": [status ...], "search_metadata": {...}}

(define-json-type size (<size> make-size size?)
  (w size-w "w" integer)
  (h size-h "h" integer)
  (resize size-resize "resize" string))

(define-json-type sizes (<sizes> make-sizes sizes?)
  (medium sizes-medium "medium" size)
  (small sizes-small "small" size)
  (thumb sizes-thumb "thumb" size)
  (large sizes-large "large" size))

(define-json-type media (<media> make-media media?)
  (id media-id "id" integer)
  (id-str media-id-str "id_str" string)
  (indices media-indices "indices" (vector-of integer))
  (media-url media-media-url "media_url" string)
  (media-url-https media-media-url-https "media_url_https" string)
  (url media-url "url" string)
  (display-url media-display-url "display_url" string)
  (expanded-url media-expanded-url "expanded_url" string)
  (type media-type "type" string)
  (sizes media-sizes "sizes" sizes)
  (source-status-id media-source-status-id "source_status_id" integer json-absent)
  (source-status-id-str media-source-status-id-str "source_status_id_str" string json-absent))

(define-json-type url (<url> make-url url?)
  (url url-url "url" string)
  (expanded-url url-expanded-url "expanded_url" string)
  (display-url url-display-url "display_url" string)
  (indices url-indices "indices" (vector-of integer)))

(define-json-type url-list (<url-list> make-url-list url-list?)
  (urls url-list-urls "urls" (vector-of url)))

(define-json-type hashtag (<hashtag> make-hashtag hashtag?)
  (text hashtag-text "text" string)
  (indices hashtag-indices "indices" (vector-of integer)))

(define-json-type user-mention (<user-mention> make-user-mention user-mention?)
  (screen-name user-mention-screen-name "screen_name" string)
  (name user-mention-name "name" string)
  (id user-mention-id "id" integer)
  (id-str user-mention-id-str "id_str" string)
  (indices user-mention-indices "indices" (vector-of integer)))

(define-json-type entities (<entities> make-entities entities?)
  (hashtags entities-hashtags "hashtags" (vector-of hashtag))
  (symbols entities-symbols "symbols" (vector-of any))
  (urls entities-urls "urls" (vector-of url))
  (user-mentions entities-user-mentions "user_mentions" (vector-of user-mention))
  (media entities-media "media" (vector-of media) json-absent))

(define-json-type user-entities (<user-entities> make-user-entities user-entities?)
  (url user-entities-url "url" url-list json-absent)
  (description user-entities-description "description" url-list))

(define-json-type user (<user> make-user user?)
  (id user-id "id" integer)
  (id-str user-id-str "id_str" string)
  (name user-name "name" string)
  (screen-name user-screen-name "screen_name" string)
  (location user-location "location" string)
  (description user-description "description" string)
  (url user-url "url" (nullable string))
  (entities user-entities "entities" user-entities)
  (protected user-protected "protected" boolean)
  (followers-count user-followers-count "followers_count" integer)
  (friends-count user-friends-count "friends_count" integer)
  (listed-count user-listed-count "listed_count" integer)
  (created-at user-created-at "created_at" string)
  (favourites-count user-favourites-count "favourites_count" integer)
  (utc-offset user-utc-offset "utc_offset" (nullable integer))
  (time-zone user-time-zone "time_zone" (nullable string))
  (geo-enabled user-geo-enabled "geo_enabled" boolean)
  (verified user-verified "verified" boolean)
  (statuses-count user-statuses-count "statuses_count" integer)
  (lang user-lang "lang" string)
  (contributors-enabled user-contributors-enabled "contributors_enabled" boolean)
  (is-translator user-is-translator "is_translator" boolean)
  (is-translation-enabled user-is-translation-enabled "is_translation_enabled" boolean)
  (profile-background-color user-profile-background-color "profile_background_color" string)
  (profile-background-image-url user-profile-background-image-url "profile_background_image_url" string)
  (profile-background-image-url-https user-profile-background-image-url-https "profile_background_image_url_https" string)
  (profile-background-tile user-profile-background-tile "profile_background_tile" boolean)
  (profile-image-url user-profile-image-url "profile_image_url" string)
  (profile-image-url-https user-profile-image-url-https "profile_image_url_https" string)
  (profile-banner-url user-profile-banner-url "profile_banner_url" string json-absent)
  (profile-link-color user-profile-link-color "profile_link_color" string)
  (profile-sidebar-border-color user-profile-sidebar-border-color "profile_sidebar_border_color" string)
  (profile-sidebar-fill-color user-profile-sidebar-fill-color "profile_sidebar_fill_color" string)
  (profile-text-color user-profile-text-color "profile_text_color" string)
  (profile-use-background-image user-profile-use-background-image "profile_use_background_image" boolean)
  (default-profile user-default-profile "default_profile" boolean)
  (default-profile-image user-default-profile-image "default_profile_image" boolean)
  (following user-following "following" boolean)
  (follow-request-sent user-follow-request-sent "follow_request_sent" boolean)
  (notifications user-notifications "notifications" boolean))

(define-json-type metadata (<metadata> make-metadata metadata?)
  (result-type metadata-result-type "result_type" string)
  (iso-language-code metadata-iso-language-code "iso_language_code" string))

(define-json-type status (<status> make-status status?)
  (metadata status-metadata "metadata" metadata)
  (created-at status-created-at "created_at" string)
  (id status-id "id" integer)
  (id-str status-id-str "id_str" string)
  (text status-text "text" string)
  (source status-source "source" string)
  (truncated status-truncated "truncated" boolean)
  (in-reply-to-status-id status-in-reply-to-status-id "in_reply_to_status_id" (nullable integer))
  (in-reply-to-status-id-str status-in-reply-to-status-id-str "in_reply_to_status_id_str" (nullable string))
  (in-reply-to-user-id status-in-reply-to-user-id "in_reply_to_user_id" (nullable integer))
  (in-reply-to-user-id-str status-in-reply-to-user-id-str "in_reply_to_user_id_str" (nullable string))
  (in-reply-to-screen-name status-in-reply-to-screen-name "in_reply_to_screen_name" (nullable string))
  (user status-user "user" user)
  (geo status-geo "geo" any)
  (coordinates status-coordinates "coordinates" any)
  (place status-place "place" any)
  (contributors status-contributors "contributors" any)
  (retweeted-status status-retweeted-status "retweeted_status" status json-absent)
  (retweet-count status-retweet-count "retweet_count" integer)
  (favorite-count status-favorite-count "favorite_count" integer)
  (entities status-entities "entities" entities)
  (favorited status-favorited "favorited" boolean)
  (retweeted status-retweeted "retweeted" boolean)
  (possibly-sensitive status-possibly-sensitive "possibly_sensitive" boolean json-absent)
  (lang status-lang "lang" string))

(define-json-type search-metadata (<search-metadata> make-search-metadata search-metadata?)
  (completed-in search-metadata-completed-in "completed_in" real)
  (max-id search-metadata-max-id "max_id" integer)
  (max-id-str search-metadata-max-id-str "max_id_str" string)
  (next-results search-metadata-next-results "next_results" string)
  (query search-metadata-query "query" string)
  (refresh-url search-metadata-refresh-url "refresh_url" string)
  (count search-metadata-count "count" integer)
  (since-id search-metadata-since-id "since_id" integer)
  (since-id-str search-metadata-since-id-str "since_id_str" string))

(define-json-type twitter (<twitter> make-twitter twitter?)
  #:decoder json->twitter #:encoder twitter->json
  (statuses twitter-statuses "statuses" (vector-of status))
  (search-metadata twitter-search-metadata "search_metadata" search-metadata))

;;; citm_catalog.json: names by id, events by id, performances

(define-json-type area (<area> make-area area?)
  (area-id area-area-id "areaId" integer)
  (block-ids area-block-ids "blockIds" (vector-of integer)))

(define-json-type seat-category (<seat-category> make-seat-category seat-category?)
  (areas seat-category-areas "areas" (vector-of area))
  (seat-category-id seat-category-seat-category-id "seatCategoryId" integer))

(define-json-type price (<price> make-price price?)
  (amount price-amount "amount" integer)
  (audience-sub-category-id price-audience-sub-category-id "audienceSubCategoryId" integer)
  (seat-category-id price-seat-category-id "seatCategoryId" integer))

(define-json-type performance (<performance> make-performance performance?)
  (event-id performance-event-id "eventId" integer)
  (id performance-id "id" integer)
  (logo performance-logo "logo" (nullable string))
  (name performance-name "name" (nullable string))
  (prices performance-prices "prices" (vector-of price))
  (seat-categories performance-seat-categories "seatCategories" (vector-of seat-category))
  (seat-map-image performance-seat-map-image "seatMapImage" (nullable string))
  (start performance-start "start" integer)
  (venue-code performance-venue-code "venueCode" string))

(define-json-type event (<event> make-event event?)
  (description event-description "description" (nullable string))
  (id event-id "id" integer)
  (logo event-logo "logo" (nullable string))
  (name event-name "name" string)
  (sub-topic-ids event-sub-topic-ids "subTopicIds" (vector-of integer))
  (subject-code event-subject-code "subjectCode" (nullable string))
  (subtitle event-subtitle "subtitle" (nullable string))
  (topic-ids event-topic-ids "topicIds" (vector-of integer)))

(define-json-type citm-catalog (<citm-catalog> make-citm-catalog citm-catalog?)
  #:decoder json->citm-catalog #:encoder citm-catalog->json
  (area-names citm-catalog-area-names "areaNames" (alist-of string))
  (audience-sub-category-names citm-catalog-audience-sub-category-names "audienceSubCategoryNames" (alist-of string))
  (block-names citm-catalog-block-names "blockNames" (alist-of string))
  (events citm-catalog-events "events" (alist-of event))
  (performances citm-catalog-performances "performances" (vector-of performance))
  (seat-category-names citm-catalog-seat-category-names "seatCategoryNames" (alist-of string))
  (sub-topic-names citm-catalog-sub-topic-names "subTopicNames" (alist-of string))
  (subject-names citm-catalog-subject-names "subjectNames" (alist-of string))
  (topic-names citm-catalog-topic-names "topicNames" (alist-of string))
  (topic-sub-topics citm-catalog-topic-sub-topics "topicSubTopics" (alist-of (vector-of integer)))
  (venue-names citm-catalog-venue-names "venueNames" (alist-of string)))


;;; canada.json: a GeoJSON FeatureCollection of one polygon

(define-json-type geometry (<geometry> make-geometry geometry?)
  (type geometry-type "type" string)
  (coordinates geometry-coordinates "coordinates" (vector-of (vector-of (vector-of number)))))

(define-json-type properties (<properties> make-properties properties?)
  (name properties-name "name" string))

(define-json-type feature (<feature> make-feature feature?)
  (type feature-type "type" string)
  (properties feature-properties "properties" properties)
  (geometry feature-geometry "geometry" geometry))

(define-json-type canada (<canada> make-canada canada?)
  #:decoder json->canada #:encoder canada->json
  (type canada-type "type" string)
  (features canada-features "features" (vector-of feature)))


;;; bench/json-schemas.scm ends here
